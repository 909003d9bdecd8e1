//! Images: detection by magic bytes (pi's `utils/mime.ts`) and processing to pi's inline limits
//! (`image-process.ts`, `image-resize-core.ts`).
//!
//! Images within the limits pass through byte for byte, as in pi. Converted or resized images are encoded by
//! the `image` crate where pi uses Photon: same sizes, formats, qualities and notes, different bytes.
//!
//! Unlike pi, an image is measured by its header before it is decoded: one above [`MAX_PIXELS`] is omitted with
//! a note that says why (a 500 KB PNG can declare 20 000 × 20 000 pixels, gigabytes once decoded), and decoding
//! allocates at most [`MAX_DECODE_BYTES`].

use std::io::Cursor;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::PngEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, ImageDecoder, ImageReader};
use toolwright_sdk::Content;

/// How many leading bytes detection looks at.
pub const SNIFF_BYTES: usize = 4100;

const MAX_WIDTH: u32 = 2000;
const MAX_HEIGHT: u32 = 2000;
/// 4.5 MiB of base64.
const MAX_BYTES: usize = 4_718_592;
const JPEG_QUALITY: u8 = 80;

/// The most pixels an image may declare to be decoded (a 6K screen is 20 million): 100 MB as RGBA, the most
/// any one image takes in the host, resizing buffers included, is a few hundred.
pub const MAX_PIXELS: u64 = 25_000_000;
/// What one decode may allocate (the `image` crate's own default is 512 MiB).
pub const MAX_DECODE_BYTES: u64 = 256 << 20;

/// The supported image type of a file's first bytes, if it is one.
pub fn detect(b: &[u8]) -> Option<&'static str> {
    const PNG: [u8; 8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
    if b.starts_with(&[0xff, 0xd8, 0xff]) {
        return (b.get(3) != Some(&0xf7)).then_some("image/jpeg");
    }
    if b.starts_with(&PNG) {
        return (is_png(b) && !is_animated_png(b)).then_some("image/png");
    }
    if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        return Some("image/gif");
    }
    if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP") {
        return Some("image/webp");
    }
    if b.starts_with(b"BM") && is_bmp(b) {
        return Some("image/bmp");
    }
    None
}

fn u32_be(b: &[u8], at: usize) -> u32 {
    let byte = |i: usize| u32::from(*b.get(at + i).unwrap_or(&0));
    (byte(0) << 24) | (byte(1) << 16) | (byte(2) << 8) | byte(3)
}

fn u32_le(b: &[u8], at: usize) -> u32 {
    let byte = |i: usize| u32::from(*b.get(at + i).unwrap_or(&0));
    byte(0) | (byte(1) << 8) | (byte(2) << 16) | (byte(3) << 24)
}

fn u16_le(b: &[u8], at: usize) -> u32 {
    u32::from(*b.get(at).unwrap_or(&0)) | (u32::from(*b.get(at + 1).unwrap_or(&0)) << 8)
}

fn is_png(b: &[u8]) -> bool {
    b.len() >= 16 && u32_be(b, 8) == 13 && &b[12..16] == b"IHDR"
}

/// An `acTL` chunk before the first `IDAT`.
fn is_animated_png(b: &[u8]) -> bool {
    let mut offset = 8usize;
    while offset + 8 <= b.len() {
        let length = u32_be(b, offset) as usize;
        match &b[offset + 4..offset + 8] {
            b"acTL" => return true,
            b"IDAT" => return false,
            _ => {}
        }
        let next = offset.saturating_add(12).saturating_add(length);
        if next <= offset || next > b.len() {
            return false;
        }
        offset = next;
    }
    false
}

fn is_bmp(b: &[u8]) -> bool {
    if b.len() < 26 {
        return false;
    }
    let (size, pixels, dib) = (u32_le(b, 2), u32_le(b, 10), u32_le(b, 14));
    if (size != 0 && size < 26) || u64::from(pixels) < 14 + u64::from(dib) || (size != 0 && pixels >= size) {
        return false;
    }
    let (planes, bits) = match dib {
        12 => (u16_le(b, 22), u16_le(b, 24)),
        40..=124 if b.len() >= 30 => (u16_le(b, 26), u16_le(b, 28)),
        _ => return false,
    };
    planes == 1 && [1, 4, 8, 16, 24, 32].contains(&bits)
}

/// The content pi's `read` returns for an image: a note (with hints) and the image, or the failure note alone.
pub fn content(bytes: &[u8], mime: &str) -> Vec<Content> {
    match process(bytes, mime) {
        Ok(processed) => {
            let mut note = format!("Read image file [{}]", processed.mime);
            for hint in &processed.hints {
                note.push('\n');
                note.push_str(hint);
            }
            vec![
                Content::text(note),
                Content::image(processed.data, processed.mime),
            ]
        }
        Err(message) => vec![Content::text(format!("Read image file [{mime}]\n{message}"))],
    }
}

/// pi's `normalizeToolResultImages` (auto-resize on): every image block goes through `processImage`; one whose
/// data, type or hints change is replaced by the processed image followed by a text block with the hints (when
/// there are any); one that cannot be processed is kept as it is, unless its header declares more than
/// `MAX_PIXELS` (25 megapixels): that one is replaced by the note saying so. `None` when nothing changed.
///
/// An embedded resource holding an image (an `image/*` blob, which the model sees as an image) goes through the
/// same, and stays a resource.
pub fn normalize_images(content: &[Content]) -> Option<Vec<Content>> {
    use toolwright_sdk::ResourceBody;
    let mut changed = false;
    let mut out = Vec::with_capacity(content.len());
    for block in content {
        let (data, mime_type) = match block {
            Content::Image { data, mime_type } => (data, mime_type.as_str()),
            Content::Resource { resource } => match (&resource.body, resource.mime_type.as_deref()) {
                (ResourceBody::Blob { blob }, Some(mime)) if mime.starts_with("image/") => (blob, mime),
                _ => {
                    out.push(block.clone());
                    continue;
                }
            },
            _ => {
                out.push(block.clone());
                continue;
            }
        };
        let bytes = STANDARD.decode(data).ok();
        if let Some(Err(note)) = bytes.as_deref().map(within_pixel_limit) {
            changed = true;
            out.push(Content::text(note));
            continue;
        }
        let processed = bytes.and_then(|bytes| process(&bytes, mime_type).ok());
        match processed {
            Some(p) if p.data != *data || p.mime != mime_type || !p.hints.is_empty() => {
                changed = true;
                out.push(match block {
                    Content::Resource { resource } => {
                        Content::resource_blob(resource.uri.clone(), Some(p.mime.to_owned()), p.data)
                    }
                    _ => Content::image(p.data, p.mime),
                });
                if !p.hints.is_empty() {
                    out.push(Content::text(p.hints.join("\n")));
                }
            }
            _ => out.push(block.clone()),
        }
    }
    changed.then_some(out)
}

struct Processed {
    data: String,
    mime: &'static str,
    hints: Vec<String>,
}

/// The note for an image whose header declares more than [`MAX_PIXELS`]; `Ok` for one within it, and for bytes
/// whose header cannot be read (decoding fails on those anyway, with pi's note).
fn within_pixel_limit(bytes: &[u8]) -> Result<(), String> {
    let dimensions = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .ok()
        .and_then(|reader| reader.into_dimensions().ok());
    match dimensions {
        Some((w, h)) if u64::from(w) * u64::from(h) > MAX_PIXELS => Err(format!(
            "[Image omitted: {w}x{h} is more than the {} megapixels an image may have to be decoded.]",
            MAX_PIXELS / 1_000_000
        )),
        _ => Ok(()),
    }
}

/// pi's `processImage` with auto-resize on, after the header check.
fn process(bytes: &[u8], mime: &str) -> Result<Processed, std::borrow::Cow<'static, str>> {
    within_pixel_limit(bytes)?;
    let mut hints = Vec::new();
    let (bytes, mime, converted_from): (Vec<u8>, &'static str, Option<&str>) = match mime {
        "image/png" => (bytes.to_vec(), "image/png", None),
        "image/jpeg" => (bytes.to_vec(), "image/jpeg", None),
        "image/gif" => (bytes.to_vec(), "image/gif", None),
        "image/webp" => (bytes.to_vec(), "image/webp", None),
        other => {
            let png = decode(bytes)
                .and_then(|img| encode_png(&img))
                .ok_or("[Image omitted: could not be converted to a supported inline image format.]")?;
            (png, "image/png", Some(other))
        }
    };
    let resized = resize(&bytes, mime)
        .ok_or("[Image omitted: could not be resized below the inline image size limit.]")?;
    if let Some(from) = converted_from
        && from != resized.mime
    {
        hints.push(format!("[Image converted from {from} to {}.]", resized.mime));
    }
    if resized.was_resized {
        let scale = f64::from(resized.original.0) / f64::from(resized.size.0);
        hints.push(format!(
            "[Image: original {}x{}, displayed at {}x{}. Multiply coordinates by {:.2} to map to original image.]",
            resized.original.0, resized.original.1, resized.size.0, resized.size.1, scale
        ));
    }
    Ok(Processed {
        data: resized.data,
        mime: resized.mime,
        hints,
    })
}

/// Decode with the EXIF orientation applied, within [`MAX_DECODE_BYTES`].
fn decode(bytes: &[u8]) -> Option<DynamicImage> {
    let mut reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format().ok()?;
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().ok()?;
    let orientation = decoder.orientation().ok()?;
    let mut image = DynamicImage::from_decoder(decoder).ok()?;
    image.apply_orientation(orientation);
    Some(image)
}

fn encode_png(image: &DynamicImage) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    image.write_with_encoder(PngEncoder::new(&mut out)).ok()?;
    Some(out)
}

fn encode_jpeg(image: &DynamicImage, quality: u8) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    // JPEG has no alpha channel.
    DynamicImage::ImageRgb8(image.to_rgb8())
        .write_with_encoder(JpegEncoder::new_with_quality(&mut out, quality))
        .ok()?;
    Some(out)
}

struct Resized {
    data: String,
    mime: &'static str,
    original: (u32, u32),
    size: (u32, u32),
    was_resized: bool,
}

/// pi's `resizeImageInProcess` with the default options.
fn resize(bytes: &[u8], mime: &'static str) -> Option<Resized> {
    let image = decode(bytes)?;
    let original = (image.width(), image.height());
    if original.0 <= MAX_WIDTH && original.1 <= MAX_HEIGHT && bytes.len().div_ceil(3) * 4 < MAX_BYTES {
        let data = STANDARD.encode(bytes);
        return Some(Resized {
            data,
            mime,
            original,
            size: original,
            was_resized: false,
        });
    }
    let (mut w, mut h) = original;
    if w > MAX_WIDTH {
        h = (f64::from(h) * f64::from(MAX_WIDTH) / f64::from(w)).round() as u32;
        w = MAX_WIDTH;
    }
    if h > MAX_HEIGHT {
        w = (f64::from(w) * f64::from(MAX_HEIGHT) / f64::from(h)).round() as u32;
        h = MAX_HEIGHT;
    }
    let mut qualities = vec![JPEG_QUALITY];
    for q in [85, 70, 55, 40] {
        if !qualities.contains(&q) {
            qualities.push(q);
        }
    }
    loop {
        let scaled = image.resize_exact(w.max(1), h.max(1), FilterType::Lanczos3);
        let png = encode_png(&scaled).map(|b| (STANDARD.encode(b), "image/png"));
        let jpegs: Vec<(String, &'static str)> = qualities
            .iter()
            .filter_map(|q| encode_jpeg(&scaled, *q).map(|b| (STANDARD.encode(b), "image/jpeg")))
            .collect();
        let mut candidates: Vec<(String, &'static str)> = Vec::new();
        let mut jpegs = jpegs.into_iter();
        let first_jpeg = jpegs.next();
        match (png, first_jpeg) {
            (Some(p), Some(j)) if j.0.len() < p.0.len() => candidates.extend([j, p]),
            (p, j) => candidates.extend(p.into_iter().chain(j)),
        }
        candidates.extend(jpegs);
        if let Some((data, mime)) = candidates.into_iter().find(|(d, _)| d.len() < MAX_BYTES) {
            return Some(Resized {
                data,
                mime,
                original,
                size: (w, h),
                was_resized: true,
            });
        }
        if w == 1 && h == 1 {
            return None;
        }
        let next = |d: u32| {
            if d == 1 {
                1
            } else {
                ((f64::from(d) * 0.75).floor() as u32).max(1)
            }
        };
        let (nw, nh) = (next(w), next(h));
        if (nw, nh) == (w, h) {
            return None;
        }
        (w, h) = (nw, nh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        encode_png(&DynamicImage::new_rgb8(w, h)).unwrap()
    }

    /// Measured by its header: 30 megapixels are omitted with a note, from `read` and from any result, and no
    /// decode is tried.
    #[test]
    fn images_above_the_pixel_limit_are_omitted_by_their_header() {
        let big = encode_png(&DynamicImage::new_luma8(6000, 5000)).unwrap();
        let note =
            "[Image omitted: 6000x5000 is more than the 25 megapixels an image may have to be decoded.]";
        assert_eq!(
            content(&big, "image/png"),
            vec![Content::text(format!("Read image file [image/png]\n{note}"))]
        );
        let blocks = vec![
            Content::text("before"),
            Content::image(STANDARD.encode(&big), "image/png"),
        ];
        assert_eq!(
            normalize_images(&blocks),
            Some(vec![Content::text("before"), Content::text(note)])
        );
    }

    #[test]
    fn detects_by_magic_bytes_only() {
        assert_eq!(detect(&png(2, 2)), Some("image/png"));
        assert_eq!(detect(b"GIF89a...."), Some("image/gif"));
        assert_eq!(detect(&[0xff, 0xd8, 0xff, 0xe0]), Some("image/jpeg"));
        assert_eq!(detect(&[0xff, 0xd8, 0xff, 0xf7]), None);
        assert_eq!(detect(b"hello world"), None);
    }

    #[test]
    fn small_images_pass_through_and_big_ones_are_resized_with_a_note() {
        let small = png(3, 2);
        let content = content(&small, "image/png");
        assert_eq!(content[0], Content::text("Read image file [image/png]"));
        assert_eq!(content[1], Content::image(STANDARD.encode(&small), "image/png"));

        let big = png(3000, 1000);
        let content = super::content(&big, "image/png");
        let note = content[0].as_text().unwrap();
        assert!(note.contains("[Image: original 3000x1000, displayed at 2000x667. Multiply coordinates by 1.50 to map to original image.]"), "{note}");
    }

    #[test]
    fn result_images_are_normalised_as_pi_does_after_the_handlers() {
        let small = Content::image(STANDARD.encode(png(3, 2)), "image/png");
        let text = Content::text("caption");
        assert_eq!(
            normalize_images(&[text.clone(), small.clone()]),
            None,
            "nothing to change"
        );
        let broken = Content::image("not base64!", "image/png");
        assert_eq!(
            normalize_images(std::slice::from_ref(&broken)),
            None,
            "an image that cannot be processed stays"
        );

        let big = Content::image(STANDARD.encode(png(3000, 1000)), "image/png");
        let out = normalize_images(&[text.clone(), big]).unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(out[0], text);
        assert!(matches!(&out[1], Content::Image { mime_type, .. } if mime_type == "image/png"));
        assert_eq!(
            out[2].as_text(),
            Some(
                "[Image: original 3000x1000, displayed at 2000x667. Multiply coordinates by 1.50 to map to original image.]"
            )
        );
    }

    #[test]
    fn bmp_is_converted_to_png() {
        let mut bmp = Vec::new();
        DynamicImage::new_rgb8(2, 2)
            .write_to(&mut Cursor::new(&mut bmp), image::ImageFormat::Bmp)
            .unwrap();
        assert_eq!(detect(&bmp), Some("image/bmp"));
        let content = content(&bmp, "image/bmp");
        assert_eq!(
            content[0].as_text(),
            Some("Read image file [image/png]\n[Image converted from image/bmp to image/png.]")
        );
    }

    #[test]
    fn an_image_resource_is_normalised_as_an_image_and_stays_a_resource() {
        // The model sees an `image/*` blob resource as an image: it gets the same checks.
        let mut bmp = Vec::new();
        DynamicImage::new_rgb8(2, 2)
            .write_to(&mut Cursor::new(&mut bmp), image::ImageFormat::Bmp)
            .unwrap();
        let resource = Content::resource_blob("p://x.bmp", Some("image/bmp".into()), STANDARD.encode(&bmp));
        let out = normalize_images(&[resource]).unwrap();
        assert!(
            matches!(&out[0], Content::Resource { resource } if resource.mime_type.as_deref() == Some("image/png")),
            "{out:?}"
        );
        assert_eq!(
            out[1].as_text(),
            Some("[Image converted from image/bmp to image/png.]")
        );
        let big = encode_png(&DynamicImage::new_luma8(6000, 5000)).unwrap();
        let huge = Content::resource_blob("p://big.png", Some("image/png".into()), STANDARD.encode(&big));
        assert!(
            normalize_images(&[huge]).unwrap()[0]
                .as_text()
                .unwrap()
                .starts_with("[Image omitted: 6000x5000")
        );
        let text = Content::resource_text("p://t", Some("image/svg+xml".into()), "<svg/>");
        assert_eq!(normalize_images(&[text]), None, "a text resource is not an image");
    }
}
