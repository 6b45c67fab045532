//! One error type for the crate. Every message names the file (or the parameter) and the
//! problem on one line, because it is shown as-is in the CLI and on the page.

use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum Error {
    /// The file is readable but its content is not what it claims or what we support.
    #[error("{file}: {message}")]
    Format { file: String, message: String },
    /// A compressed chunk failed to decode.
    #[error("{file}: chunk {chunk}: {message}")]
    Decode {
        file: String,
        chunk: String,
        message: String,
    },
    /// A file named by a link or a data set is not among the opened files.
    #[error("{referenced_by}: linked file '{missing}' was not given (open it together with the file that links it)")]
    MissingFile {
        missing: String,
        referenced_by: String,
        /// Other link targets the same open found missing (not in the message: one named
        /// file is the user's next step), so that a native open can find them all at once.
        also_missing: Vec<String>,
    },
    /// Reading bytes from a file failed (I/O error, out of range).
    #[error("{file}: {message}")]
    Io { file: String, message: String },
    /// The user's parameters do not fit the acquisition.
    #[error("{0}")]
    Param(String),
    /// A product parameter missing or out of range, named by its field as `stem4d.product`
    /// spells it (`'center'`, `'bin'`): the CLI says it with its flag (`cli::say_error`).
    #[error("{message}")]
    ProductParam {
        field: &'static str,
        message: String,
    },
    /// The scan shape is missing or does not fit the frames.
    #[error("{file}: {message}")]
    ScanShape { file: String, message: String },
    /// What the GPU path cannot do exactly for this input or adapter (a float32 span too
    /// wide for 128-bit sums, moments past 64 bits, a tile past the binding limit, ...): the
    /// CPU reference can, and is the only error the engine's users fall back to it on.
    #[error("GPU: {0}")]
    GpuUnsupported(String),
    /// The GPU had no memory for a plan; the message gives its sizes and the alternatives.
    #[error("GPU: {0}")]
    GpuOutOfMemory(String),
    /// The device was lost; reopening the acquisition makes a new one.
    #[error("GPU: {0}")]
    DeviceLost(String),
    /// Other failures of a GPU backend (no adapter, a pipeline refused, a mapping failed).
    #[error("GPU: {0}")]
    Gpu(String),
    /// The caller stopped the work (`watch`) while it was at the named stage.
    #[error("cancelled while {0}")]
    Cancelled(String),
}

impl Error {
    pub fn format(file: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Format {
            file: file.into(),
            message: message.into(),
        }
    }

    pub fn param(message: impl Into<String>) -> Self {
        Error::Param(message.into())
    }

    /// A product parameter's problem; `message` names the field as `'field'`.
    pub fn product_param(field: &'static str, message: impl Into<String>) -> Self {
        Error::ProductParam {
            field,
            message: message.into(),
        }
    }

    /// Whether the GPU path declined this input (the CPU reference computes it instead).
    pub fn is_gpu_unsupported(&self) -> bool {
        matches!(self, Error::GpuUnsupported(_))
    }
}
