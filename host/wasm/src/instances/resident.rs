//! A plugin's written pages kept resident across wasmtime's reset of its instance's memory slot.
//!
//! When a store is dropped, wasmtime resets its memory slot for the next instance by asking the kernel which
//! pages were written (`PAGEMAP_SCAN`) and copying those back from the memory image, so they stay resident; but
//! it reads at most 32 runs of written pages (wasmtime 48's `MAX_REGIONS`, a constant), and decommits everything
//! past the 32nd, which the next instance in the slot then faults back in, page by page. A Rust plugin writes a
//! few runs; an interpreter writes many: a call of the JavaScript example writes 158 pages in 63 runs, one of the
//! Python example 192 in 147, so every fresh call faulted 80 to 215 pages back (docs/performance.md,
//! "Python and JavaScript plugins").
//!
//! Before a finished store is dropped (`super::recycler`, on the background thread), [`Image::keep_written_resident`]
//! looks at the memory slots that hold the plugin's memory image (the `rw-p` mappings of its cached `.cwasm` file in
//! `/proc/self/maps`, with the anonymous memory around them: the slot's accessible memory) and, where a slot has
//! more than [`MAX_RUNS`] runs of written pages, merges them: the smallest gaps between runs are faulted in for
//! writing (`MADV_POPULATE_WRITE`), until at most [`MAX_RUNS`] runs remain or the runs would pass what wasmtime
//! keeps resident ([`crate::engine::KEEP_RESIDENT`]). Faulting a page in for writing gives the process its own
//! copy of it with the same contents: no byte a guest can read changes, in this slot or in any other (a slot
//! another call is running in is left as it would be, save that some of its pages are copied sooner). wasmtime's
//! reset then finds every written page among its 32 runs and copies them all back; the next instance in the
//! slot faults none of them. The pages kept stay written through later resets, so a slot merged once stays
//! merged unless a later call writes pages outside its runs: each slot is scanned when it first maps the image,
//! then one of them in turn at each drop ([`RESCANS`]); the file mapped is known by device and inode from its
//! load ([`FileId`]), so an entry renamed over since is no matter.
//!
//! Linux only, and only for plugins loaded from the component cache (a component compiled in this process has
//! its image in anonymous memory, which cannot be told from another's). Where the kernel lacks `PAGEMAP_SCAN`
//! (6.7) or `MADV_POPULATE_WRITE` (5.14), nothing is done, as wasmtime does without the first; nor where the
//! engine resets without the scan (swap active: `crate::engine`), which links no [`Image`].

// Off Linux only the types are used (nothing is scanned).
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::sync::Mutex;

use crate::cache::FileId;

/// Runs of written pages wasmtime's reset keeps (its `MAX_REGIONS`).
pub(crate) const MAX_RUNS: usize = 32;

/// How many of the slots already merged are scanned again at each drop, in turn: a call may write pages outside
/// the runs its slot kept, and which slot the finished store held is not known (wasmtime does not say).
const RESCANS: usize = 1;

/// A plugin's memory image, mapped from its cached `.cwasm` file, and the slots holding it whose runs were
/// merged already.
pub(crate) struct Image {
    file: FileId,
    merged: Mutex<Merged>,
}

/// The memory slots (by start address) merged already, and the one scanned again last.
#[derive(Default)]
struct Merged {
    slots: Vec<usize>,
    last: usize,
}

impl Merged {
    /// Of `slots` (the slots mapping the image now, in address order), those to scan: each not merged yet, and
    /// [`RESCANS`] of those merged, in turn. Slots no longer mapping the image are forgotten (one mapping it
    /// again is merged again).
    fn due(&mut self, slots: &[(usize, usize)]) -> Vec<(usize, usize)> {
        self.slots
            .retain(|start| slots.iter().any(|slot| slot.0 == *start));
        let (mut scan, mut merged) = (Vec::new(), Vec::new());
        for &slot in slots {
            if self.slots.contains(&slot.0) {
                merged.push(slot);
            } else {
                scan.push(slot);
            }
        }
        // In address order from the one after the last, so that slots coming and going skip none.
        let from = merged.iter().position(|slot| slot.0 > self.last).unwrap_or(0);
        for &slot in merged.iter().cycle().skip(from).take(RESCANS.min(merged.len())) {
            scan.push(slot);
            self.last = slot.0;
        }
        scan
    }
}

/// This process's page map, opened by each host once for [`Image::keep_written_resident`] (nothing where the
/// kernel lacks `PAGEMAP_SCAN` or `MADV_POPULATE_WRITE`, or elsewhere than Linux).
pub(crate) struct PageMap(#[cfg(target_os = "linux")] Option<linux::Scanner>);

impl PageMap {
    /// Probe the kernel and open the map.
    pub(crate) fn open() -> PageMap {
        PageMap(
            #[cfg(target_os = "linux")]
            linux::Scanner::open(),
        )
    }
}

impl Image {
    /// The image mapped from `file`.
    pub(crate) fn new(file: FileId) -> Image {
        Image {
            file,
            merged: Mutex::default(),
        }
    }

    /// Merge the runs of written pages in the memory slots that map this image (see the module): each slot
    /// once it maps it, and then one in turn at each call.
    #[cfg(target_os = "linux")]
    pub(crate) fn keep_written_resident(&self, pages: &PageMap) {
        let Some(scanner) = &pages.0 else {
            return;
        };
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return;
        };
        let page = linux::page_size();
        let budget = crate::engine::KEEP_RESIDENT / page;
        let slots = linux::image_slots(&maps, self.file);
        let mut merged = self
            .merged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut regions = None;
        for slot in merged.due(&slots) {
            let regions = regions.get_or_insert_with(linux::Regions::new);
            let Some(runs) = scanner.written_runs(slot, page, regions) else {
                return;
            };
            let gaps = gaps_to_fill(&runs, MAX_RUNS, budget);
            tracing::trace!(
                runs = runs.len(),
                filled = gaps.len(),
                "runs of written pages in a memory slot"
            );
            for gap in gaps {
                linux::populate_write(gap.0 * page, (gap.1 - gap.0) * page);
            }
            if !merged.slots.contains(&slot.0) {
                merged.slots.push(slot.0);
            }
        }
    }

    /// Elsewhere: nothing to do (wasmtime resets a slot by `madvise` or copying, not by written runs).
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn keep_written_resident(&self, _: &PageMap) {}
}

/// Which gaps between `runs` (sorted, disjoint `[start, end)` page numbers) to fill so that at most `max_runs`
/// remain, smallest first, as long as the pages of the runs and the filled gaps stay within `budget`: the gaps as
/// `[start, end)` page numbers, in address order.
pub(crate) fn gaps_to_fill(runs: &[(usize, usize)], max_runs: usize, budget: usize) -> Vec<(usize, usize)> {
    if runs.len() <= max_runs {
        return Vec::new();
    }
    let mut gaps: Vec<(usize, usize)> = runs.windows(2).map(|w| (w[0].1, w[1].0)).collect();
    gaps.sort_by_key(|&(start, end)| (end - start, start));
    let mut pages: usize = runs.iter().map(|(start, end)| end - start).sum();
    let mut chosen = Vec::new();
    for (start, end) in gaps.into_iter().take(runs.len() - max_runs) {
        pages += end - start;
        if pages > budget {
            break;
        }
        chosen.push((start, end));
    }
    chosen.sort_unstable();
    chosen
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod linux {
    //! The two system calls and `/proc/self/maps`.

    use std::os::fd::AsRawFd;

    use crate::cache::FileId;

    /// `PAGE_IS_WRITTEN`, `PAGE_IS_FILE`, `PAGE_IS_PRESENT`, `PAGE_IS_PFNZERO` (linux/fs.h).
    const WRITTEN: u64 = 1 << 1;
    const FILE: u64 = 1 << 2;
    const PRESENT: u64 = 1 << 3;
    const PFNZERO: u64 = 1 << 5;

    /// `struct pm_scan_arg` (linux/fs.h).
    #[repr(C)]
    struct ScanArg {
        size: u64,
        flags: u64,
        start: u64,
        end: u64,
        walk_end: u64,
        vec: u64,
        vec_len: u64,
        max_pages: u64,
        category_inverted: u64,
        category_mask: u64,
        category_anyof_mask: u64,
        return_mask: u64,
    }

    /// `struct page_region` (linux/fs.h).
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Region {
        start: u64,
        end: u64,
        categories: u64,
    }

    /// `PAGEMAP_SCAN`: `_IOWR('f', 16, struct pm_scan_arg)`.
    const PAGEMAP_SCAN: u64 = (3 << 30) | ((size_of::<ScanArg>() as u64) << 16) | ((b'f' as u64) << 8) | 16;

    /// How many runs one scan reports at most: past them, the rest of the slot is left as it is.
    const SCAN_RUNS: usize = 1024;

    pub(super) fn page_size() -> usize {
        // SAFETY: sysconf reads a constant of the system.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).unwrap_or(4096)
    }

    /// Room for what one scan reports.
    pub(super) struct Regions(Vec<Region>);

    impl Regions {
        pub(super) fn new() -> Regions {
            Regions(vec![Region::default(); SCAN_RUNS])
        }
    }

    /// This process's page map, open for `PAGEMAP_SCAN` (none where the kernel lacks it).
    pub(super) struct Scanner(std::fs::File);

    impl Scanner {
        /// The scanner, where the kernel knows both `PAGEMAP_SCAN` and `MADV_POPULATE_WRITE`.
        pub(super) fn open() -> Option<Scanner> {
            // The advice is checked before the length: an empty range tells whether the kernel knows it (EINVAL
            // if not), whatever is mapped there.
            let page = page_size();
            // SAFETY: an empty range: nothing is touched.
            let known = unsafe { libc::madvise(page as *mut libc::c_void, 0, libc::MADV_POPULATE_WRITE) };
            if known != 0 {
                return None;
            }
            let file = std::fs::File::open("/proc/self/pagemap").ok()?;
            let scanner = Scanner(file);
            // A scan of nothing tells whether the kernel knows the request.
            scanner.scan(0, 0, &mut [Region::default(); 1]).map(|_| scanner)
        }

        /// The written, present pages of `[start, end)` that are neither the zero page nor a file's (those are
        /// what wasmtime copies back), as runs; `None` when the kernel refused.
        fn scan(&self, start: u64, end: u64, regions: &mut [Region]) -> Option<usize> {
            let mut arg = ScanArg {
                size: size_of::<ScanArg>() as u64,
                flags: 0,
                start,
                end,
                walk_end: 0,
                vec: regions.as_mut_ptr() as u64,
                vec_len: regions.len() as u64,
                max_pages: 0,
                category_inverted: PFNZERO | FILE,
                category_mask: WRITTEN | PRESENT | PFNZERO | FILE,
                category_anyof_mask: 0,
                return_mask: 0,
            };
            // SAFETY: the request reads `arg` and writes at most `vec_len` regions into `regions`, which outlive
            // the call; it only reads the page tables of this process.
            let found =
                unsafe { libc::ioctl(self.0.as_raw_fd(), PAGEMAP_SCAN as _, &mut arg as *mut ScanArg) };
            usize::try_from(found).ok()
        }

        /// The runs of written pages in `slot` (a byte range), as `[start, end)` page numbers.
        pub(super) fn written_runs(
            &self,
            slot: (usize, usize),
            page: usize,
            regions: &mut Regions,
        ) -> Option<Vec<(usize, usize)>> {
            let regions = &mut regions.0;
            let found = self.scan(slot.0 as u64, slot.1 as u64, regions)?;
            Some(
                regions[..found.min(SCAN_RUNS)]
                    .iter()
                    .map(|r| (r.start as usize / page, r.end as usize / page))
                    .collect(),
            )
        }
    }

    /// Fault `[start, start + len)` in for writing: each page becomes the process's own, with the same contents.
    /// A range that cannot be (a mapping changed meanwhile: unmapped, made inaccessible or read-only by wasmtime
    /// for another instance) is left as it is, wholly or from where it failed.
    pub(super) fn populate_write(start: usize, len: usize) {
        // SAFETY: MADV_POPULATE_WRITE changes no byte of memory, only which physical page holds it; on a range
        // that is not (or no longer) mapped writable it stops (ENOMEM, EFAULT, EINVAL) without touching anything
        // further, and the pages it populated before are as harmless.
        let _ = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
    }

    /// The accessible memory of every slot mapping `file` read-write and private at an
    /// offset past its start (a memory image, mapped into a pooled linear memory; the whole file mapped at offset 0
    /// is wasmtime loading it, before it makes it read-only), with the anonymous read-write mappings right before
    /// and after it (the slot's memory below and above the image); as byte ranges.
    pub(super) fn image_slots(maps: &str, file: FileId) -> Vec<(usize, usize)> {
        let lines: Vec<Mapping> = maps.lines().filter_map(Mapping::parse).collect();
        let mut slots = Vec::new();
        for (at, line) in lines.iter().enumerate() {
            if line.file != file || !line.private_rw || line.offset == 0 {
                continue;
            }
            let (mut start, mut end) = (line.start, line.end);
            for before in lines[..at].iter().rev() {
                if before.end != start || !before.anonymous_rw() {
                    break;
                }
                start = before.start;
            }
            for after in &lines[at + 1..] {
                if after.start != end || !after.anonymous_rw() {
                    break;
                }
                end = after.end;
            }
            slots.push((start, end));
        }
        slots
    }

    /// One line of `/proc/self/maps`.
    struct Mapping {
        start: usize,
        end: usize,
        private_rw: bool,
        offset: u64,
        /// Device (major, minor) and inode: all 0 for anonymous memory.
        file: FileId,
    }

    impl Mapping {
        fn parse(line: &str) -> Option<Mapping> {
            let mut fields = line.split_ascii_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            let perms = fields.next()?;
            let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
            let (major, minor) = fields.next()?.split_once(':')?;
            let inode = fields.next()?.parse().ok()?;
            Some(Mapping {
                start: usize::from_str_radix(start, 16).ok()?,
                end: usize::from_str_radix(end, 16).ok()?,
                private_rw: perms == "rw-p",
                offset,
                file: FileId(
                    u32::from_str_radix(major, 16).ok()?,
                    u32::from_str_radix(minor, 16).ok()?,
                    inode,
                ),
            })
        }

        fn anonymous_rw(&self) -> bool {
            self.private_rw && self.file.2 == 0
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_slot_is_the_image_mapping_with_the_anonymous_memory_around_it() {
            let maps = "\
7da244800000-7da244801000 r--p 00000000 fe:00 77 /c/x.cwasm
7da244801000-7da245cb5000 r-xp 00001000 fe:00 77 /c/x.cwasm
7da245cb5000-7da246000000 rw-p 00000000 fe:00 77 /c/x.cwasm
7da246000000-7da246100000 rw-p 00000000 00:00 0
7da246100000-7da246200000 rw-p 00002000 08:01 77 /usr/lib/libsame-inode.so
7da252c00000-7da254c00000 ---p 00000000 00:00 0
7da254c00000-7da254cfc000 rw-p 00000000 00:00 0
7da254cfc000-7da255610000 rw-p 0195a000 fe:00 77 /c/x.cwasm
7da255610000-7da255700000 rw-p 00000000 00:00 0
7da255700000-7ec596c00000 ---p 00000000 00:00 0
7ec596c00000-7ec596cfc000 rw-p 00000000 00:00 0
7ec596cfc000-7ec597610000 rw-p 0195a000 fe:00 78 /c/other.cwasm
7fe8d8c7e000-7fe8d8c7f000 ---p 00000000 00:00 0
";
            // Not the whole file mapped at offset 0 (a load under way), nor another device's file of that inode.
            assert_eq!(
                image_slots(maps, FileId(0xfe, 0, 77)),
                vec![(0x7da254c00000, 0x7da255700000)]
            );
            assert_eq!(
                image_slots(maps, FileId(0xfe, 0, 78)),
                vec![(0x7ec596c00000, 0x7ec597610000)]
            );
            assert!(image_slots(maps, FileId(0xfe, 0, 79)).is_empty());
        }

        #[test]
        fn the_kernel_reports_the_pages_written_in_a_mapping_and_a_populated_gap_joins_two_runs() {
            let Some(scanner) = Scanner::open() else {
                return; // a kernel before 6.7: nothing is done, nothing to check
            };
            let page = page_size();
            let len = 8 * page;
            // SAFETY: a fresh private anonymous mapping, unmapped at the end.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(base, libc::MAP_FAILED);
            let base = base as usize;
            // Pages 1 and 4 written, page 2 only read (the zero page): two runs.
            // SAFETY: inside the mapping.
            unsafe {
                *((base + page) as *mut u8) = 1;
                *((base + 4 * page) as *mut u8) = 4;
                assert_eq!(std::ptr::read_volatile((base + 2 * page) as *const u8), 0);
            }
            let first = base / page;
            let runs = scanner
                .written_runs((base, base + len), page, &mut Regions::new())
                .expect("scanned");
            assert_eq!(runs, vec![(first + 1, first + 2), (first + 4, first + 5)]);
            // The gap faulted in for writing: one run, and the bytes are what they were.
            populate_write(base + 2 * page, 2 * page);
            let runs = scanner
                .written_runs((base, base + len), page, &mut Regions::new())
                .expect("scanned");
            assert_eq!(runs, vec![(first + 1, first + 5)]);
            // SAFETY: inside the mapping, which is then unmapped.
            unsafe {
                assert_eq!(*((base + page) as *const u8), 1);
                assert_eq!(*((base + 2 * page) as *const u8), 0);
                assert_eq!(*((base + 4 * page) as *const u8), 4);
                libc::munmap(base as *mut libc::c_void, len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_slot_is_scanned_once_it_maps_the_image_and_then_one_merged_slot_in_turn() {
        let mut merged = Merged::default();
        let (a, b, c) = ((0x1000, 0x2000), (0x3000, 0x4000), (0x5000, 0x6000));
        // Nothing merged yet: every slot.
        assert_eq!(merged.due(&[a, b]), vec![a, b]);
        merged.slots.extend([a.0, b.0]);
        // Then one of them at each drop, in turn, and a new slot at once.
        assert_eq!(merged.due(&[a, b]), vec![a]);
        assert_eq!(merged.due(&[a, b, c]), vec![c, b]);
        merged.slots.push(c.0);
        assert_eq!(merged.due(&[a, b, c]), vec![c]);
        assert_eq!(merged.due(&[a, b, c]), vec![a]);
        // A slot that no longer maps the image is forgotten: merged again when it maps it again.
        assert_eq!(merged.due(&[a, c]), vec![c]);
        assert_eq!(merged.slots, vec![a.0, c.0]);
        assert_eq!(merged.due(&[a, b, c]), vec![b, a]);
    }

    #[test]
    fn the_smallest_gaps_are_filled_until_the_runs_fit_within_the_budget() {
        let runs = [(0, 1), (2, 3), (10, 11), (13, 14), (30, 31)];
        // Gaps: 1 (1..2), 7 (3..10), 2 (11..13), 16 (14..30).
        assert!(gaps_to_fill(&runs, 5, 100).is_empty(), "few enough runs");
        assert_eq!(gaps_to_fill(&runs, 3, 100), vec![(1, 2), (11, 13)]);
        assert_eq!(gaps_to_fill(&runs, 2, 100), vec![(1, 2), (3, 10), (11, 13)]);
        // 5 written pages: room for the first gap (6), not the second (8).
        assert_eq!(gaps_to_fill(&runs, 3, 7), vec![(1, 2)]);
        assert!(gaps_to_fill(&runs, 3, 5).is_empty());
    }
}
