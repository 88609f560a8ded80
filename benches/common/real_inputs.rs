//! The inputs of the real programs, generated once under `target/real-programs/data/` (same
//! bytes every time, so runs on different days hash and compress the same thing).

use std::io::Write;
use std::path::{Path, PathBuf};

pub type BoxError = Box<dyn std::error::Error>;

/// Deterministic pseudo-random bytes (xorshift64*).
struct Bytes(u64);

impl Bytes {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// A file of `mib` MiB of pseudo-random bytes (b3sum's input).
pub fn random_file(dir: &Path, mib: usize) -> Result<PathBuf, BoxError> {
    let path = dir.join(format!("random-{mib}MiB.bin"));
    let len = (mib as u64) << 20;
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == len) {
        return Ok(path);
    }
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("tmp");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    let mut rng = Bytes(0x9E37_79B9_7F4A_7C15);
    for _ in 0..len / 8 {
        f.write_all(&rng.next().to_le_bytes())?;
    }
    f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// An RGB PNG of `side`×`side` pixels, stored with the fastest compression so that oxipng
/// has work to do: smooth gradients with some noise and blocks (a photo-like image).
pub fn png(dir: &Path, side: u32) -> Result<PathBuf, BoxError> {
    let path = dir.join(format!("image-{side}.png"));
    if path.exists() {
        return Ok(path);
    }
    std::fs::create_dir_all(dir)?;
    let mut rng = Bytes(0xD1B5_4A32_D192_ED03);
    let mut pixels = Vec::with_capacity((side * side * 3) as usize);
    for y in 0..side {
        for x in 0..side {
            let noise = (rng.next() % 24) as u32;
            let block = ((x / 64 + y / 64) % 3) * 40;
            let r = (x * 255 / side + noise) as u8;
            let g = (y * 255 / side + block) as u8;
            let b = ((x + y) * 127 / side + noise / 2) as u8;
            pixels.extend_from_slice(&[r, g, b]);
        }
    }
    let tmp = path.with_extension("tmp");
    let file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    let mut enc = png::Encoder::new(file, side, side);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Fastest);
    enc.write_header()?.write_image_data(&pixels)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}
