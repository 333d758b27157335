//! Algorithms and their options, as zarr metadata stores them:
//! `{"algorithm": "lz4", "options": {...}}` (read by [`Algorithm::from_config`], written by
//! [`Algorithm::to_config`]).
//!
//! Option names are nvCOMP's: LZ4 `data_type` and `has_header`; deflate, gzip and
//! gdeflate `algorithm` (0-5, nvCOMP's speed/ratio trade-off); gdeflate
//! `has_header`; cascaded, bitcomp and ANS `data_type`, bitcomp `algorithm`.
//! Unknown options are errors that list the valid ones. The bytes each
//! algorithm writes are listed in the table of the crate documentation.

mod config;
mod data_type;

pub use data_type::DataType;

/// An algorithm with its options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Algorithm {
    /// LZ4 blocks; with `has_header` (default) each buffer is the numcodecs `LZ4` layout.
    Lz4 {
        /// Element type hint for nvCOMP's compressor.
        data_type: DataType,
        /// Whether each buffer starts with its decoded length (4 bytes, little endian).
        has_header: bool,
    },
    /// Raw Snappy (not framed).
    Snappy,
    /// One Zstandard frame per buffer.
    Zstd,
    /// Raw DEFLATE (RFC 1951).
    Deflate {
        /// nvCOMP's compression algorithm, 0 (fastest) to 5 (best ratio).
        algorithm: u8,
    },
    /// One gzip member (RFC 1952).
    Gzip {
        /// nvCOMP's compression algorithm, 0 (fastest) to 5 (best ratio).
        algorithm: u8,
    },
    /// GDeflate pages behind zarrs' `gdeflate` header, or one bare stream.
    Gdeflate {
        /// nvCOMP's compression algorithm, 0 (fastest) to 5 (best ratio).
        algorithm: u8,
        /// Whether buffers carry the zarrs `gdeflate` page header (default).
        has_header: bool,
    },
    /// nvCOMP's cascaded format (GPU only).
    Cascaded {
        /// Element type of the data.
        data_type: DataType,
    },
    /// nvCOMP's bitcomp format (GPU only).
    Bitcomp {
        /// Bitcomp algorithm: 0 (default) or 1 (sparse).
        algorithm: u8,
        /// Element type of the data.
        data_type: DataType,
    },
    /// nvCOMP's ANS format (GPU only).
    Ans {
        /// Element type of the data (`char` or `float16`).
        data_type: DataType,
    },
}

impl Algorithm {
    /// Names of all algorithms, as written in configurations.
    pub const NAMES: [&'static str; 9] = [
        "lz4", "snappy", "zstd", "deflate", "gzip", "gdeflate", "cascaded", "bitcomp", "ans",
    ];

    /// The algorithm's name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Lz4 { .. } => "lz4",
            Self::Snappy => "snappy",
            Self::Zstd => "zstd",
            Self::Deflate { .. } => "deflate",
            Self::Gzip { .. } => "gzip",
            Self::Gdeflate { .. } => "gdeflate",
            Self::Cascaded { .. } => "cascaded",
            Self::Bitcomp { .. } => "bitcomp",
            Self::Ans { .. } => "ans",
        }
    }

    /// Whether the CPU backend implements the algorithm.
    pub fn has_cpu_implementation(&self) -> bool {
        !matches!(self, Self::Cascaded { .. } | Self::Bitcomp { .. } | Self::Ans { .. })
    }
}
