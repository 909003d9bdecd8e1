//! Inputs that are small on disk and huge once parsed, made here so no such file is committed.

/// A valid PNG of `width` × `height` black pixels (1-bit greyscale): all its pixel data is zero, so one deflate
/// block of back-references of 258 bytes holds it, about 13 bits per 258 bytes (20 000 × 20 000: 50 MB of rows
/// in 300 KB). Decoded it takes `width × height` bytes or more.
pub fn black_png(width: u32, height: u32) -> Vec<u8> {
    let row = 1 + (u64::from(width)).div_ceil(8);
    let raw = row * u64::from(height);
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend(width.to_be_bytes());
    ihdr.extend(height.to_be_bytes());
    ihdr.extend([1, 0, 0, 0, 0]); // bit depth 1, greyscale, deflate, adaptive filters, no interlace
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &zlib_zeros(raw));
    chunk(&mut png, b"IEND", &[]);
    png
}

fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend((data.len() as u32).to_be_bytes());
    png.extend(kind);
    png.extend(data);
    let mut crc = crc32(kind, 0xffff_ffff);
    crc = crc32(data, crc);
    png.extend((crc ^ 0xffff_ffff).to_be_bytes());
}

fn crc32(bytes: &[u8], mut crc: u32) -> u32 {
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// A zlib stream of `n` zero bytes: one fixed-Huffman block, a literal zero, then matches of 258 at distance 1,
/// the rest as literals.
fn zlib_zeros(n: u64) -> Vec<u8> {
    let mut bits = Bits::default();
    bits.value(1, 1); // BFINAL
    bits.value(1, 2); // BTYPE 01: fixed Huffman codes
    let mut left = n;
    if left > 0 {
        bits.code(0b0011_0000, 8); // literal 0
        left -= 1;
    }
    while left >= 258 {
        bits.code(0b1100_0101, 8); // length code 285: 258
        bits.code(0, 5); // distance code 0: 1
        left -= 258;
    }
    for _ in 0..left {
        bits.code(0b0011_0000, 8);
    }
    bits.code(0, 7); // end of block
    let mut out = vec![0x78, 0x01];
    out.extend(bits.finish());
    // Adler-32 of zeros: a stays 1, b adds 1 per byte.
    let b = (n % 65_521) as u32;
    out.extend(((b << 16) | 1).to_be_bytes());
    out
}

/// Deflate's bit order: values least significant bit first, Huffman codes most significant bit first.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    current: u8,
    used: u8,
}

impl Bits {
    fn bit(&mut self, bit: u8) {
        self.current |= bit << self.used;
        self.used += 1;
        if self.used == 8 {
            self.out.push(self.current);
            (self.current, self.used) = (0, 0);
        }
    }

    fn value(&mut self, value: u32, len: u8) {
        for i in 0..len {
            self.bit(((value >> i) & 1) as u8);
        }
    }

    fn code(&mut self, code: u32, len: u8) {
        for i in (0..len).rev() {
            self.bit(((code >> i) & 1) as u8);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.used > 0 {
            self.out.push(self.current);
        }
        self.out
    }
}
