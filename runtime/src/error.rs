//! The errors of the sharded layer.

use rowshard_kernels::KernelError;

use crate::comm::CommError;

/// Bad input found on one rank; every rank of the call returns it, tagged with that rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputError {
    /// A global id outside `[0, rows)`.
    IdOutOfRange {
        /// The id.
        id: u64,
        /// The table's rows.
        rows: u64,
    },
    /// Gradients that are not one `dim`-row per id.
    GradientShape {
        /// Values expected.
        expected: u64,
        /// Values given.
        got: u64,
    },
    /// A learning rate that is negative or not finite.
    LearningRate {
        /// Its `f32` bits.
        value: u64,
    },
    /// A relation id outside `[0, relations)`.
    RelationOutOfRange {
        /// The id.
        id: u64,
        /// The relation table's rows.
        rows: u64,
    },
    /// Arrays of one batch whose lengths disagree.
    BatchLength {
        /// The length of the first array.
        expected: u64,
        /// The length of the one that differs.
        got: u64,
    },
    /// A training target outside `[0, 1]` or not finite.
    Target {
        /// Its position in the batch.
        position: u64,
    },
    /// Label smoothing outside `[0, 1)`.
    Smoothing {
        /// Its `f32` bits.
        value: u64,
    },
    /// Triples that do not split into groups of a true triple and its corruptions.
    Groups {
        /// Triples given.
        triples: u64,
        /// Triples per group.
        group: u64,
    },
    /// A query with no true entity, under a loss that needs one (softmax cross-entropy).
    NoLabels {
        /// Its position in the batch.
        position: u64,
    },
    /// Shared negatives whose lists are not one per chunk of the global batch.
    NegativeChunks {
        /// Lists given.
        lists: u64,
        /// Chunks of the global batch.
        chunks: u64,
    },
    /// A NaN or infinite gradient value.
    NonFiniteGradient {
        /// The id it was for.
        id: u64,
        /// Its position in the caller's batch.
        position: u64,
    },
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            InputError::IdOutOfRange { id, rows } => {
                write!(f, "id {id} is outside the table's {rows} rows")
            }
            InputError::GradientShape { expected, got } => {
                write!(
                    f,
                    "gradients must be one row per id: expected {expected} values, got {got}"
                )
            }
            InputError::NonFiniteGradient { id, position } => {
                write!(
                    f,
                    "the gradient for id {id} (batch position {position}) is not finite"
                )
            }
            InputError::RelationOutOfRange { id, rows } => {
                write!(
                    f,
                    "relation {id} is outside the relation table's {rows} rows"
                )
            }
            InputError::BatchLength { expected, got } => {
                write!(
                    f,
                    "the batch's arrays must have one entry per triple: {expected} and {got}"
                )
            }
            InputError::Target { position } => {
                write!(
                    f,
                    "the target at batch position {position} is not in [0, 1]"
                )
            }
            InputError::Smoothing { value } => {
                write!(
                    f,
                    "label smoothing {} must be in [0, 1)",
                    f32::from_bits(value as u32)
                )
            }
            InputError::Groups { triples, group } => {
                write!(
                    f,
                    "{triples} triples do not split into groups of {group} (a true triple and \
                     its corruptions)"
                )
            }
            InputError::NegativeChunks { lists, chunks } => write!(
                f,
                "{lists} lists of shared negatives for {chunks} chunks of the global batch; \
                 each chunk needs one"
            ),
            InputError::NoLabels { position } => {
                write!(
                    f,
                    "the query at batch position {position} has no true entity; softmax \
                     cross-entropy needs at least one"
                )
            }
            InputError::LearningRate { value } => {
                write!(
                    f,
                    "learning rate {} must be finite and non-negative",
                    f32::from_bits(value as u32)
                )
            }
        }
    }
}

impl InputError {
    /// Three words for the status exchange.
    pub(crate) fn encode(&self) -> [u64; 3] {
        match *self {
            InputError::IdOutOfRange { id, rows } => [1, id, rows],
            InputError::GradientShape { expected, got } => [2, expected, got],
            InputError::NonFiniteGradient { id, position } => [3, id, position],
            InputError::LearningRate { value } => [4, value, 0],
            InputError::RelationOutOfRange { id, rows } => [5, id, rows],
            InputError::BatchLength { expected, got } => [6, expected, got],
            InputError::Target { position } => [7, position, 0],
            InputError::Smoothing { value } => [8, value, 0],
            InputError::NoLabels { position } => [9, position, 0],
            InputError::Groups { triples, group } => [10, triples, group],
            InputError::NegativeChunks { lists, chunks } => [11, lists, chunks],
        }
    }

    pub(crate) fn decode(words: [u64; 3]) -> Option<Self> {
        match words[0] {
            1 => Some(InputError::IdOutOfRange {
                id: words[1],
                rows: words[2],
            }),
            2 => Some(InputError::GradientShape {
                expected: words[1],
                got: words[2],
            }),
            3 => Some(InputError::NonFiniteGradient {
                id: words[1],
                position: words[2],
            }),
            4 => Some(InputError::LearningRate { value: words[1] }),
            5 => Some(InputError::RelationOutOfRange {
                id: words[1],
                rows: words[2],
            }),
            6 => Some(InputError::BatchLength {
                expected: words[1],
                got: words[2],
            }),
            7 => Some(InputError::Target { position: words[1] }),
            8 => Some(InputError::Smoothing { value: words[1] }),
            9 => Some(InputError::NoLabels { position: words[1] }),
            10 => Some(InputError::Groups {
                triples: words[1],
                group: words[2],
            }),
            11 => Some(InputError::NegativeChunks {
                lists: words[1],
                chunks: words[2],
            }),
            _ => None,
        }
    }
}

/// What went wrong in a sharded operation.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// Bad input on `rank`: refused on every rank before anything was sent or written.
    #[error("rank {rank}: {error}; nothing was changed on any rank")]
    BadInput {
        /// The rank whose input was bad.
        rank: usize,
        /// What was wrong.
        error: InputError,
    },
    /// The ranks disagree on a description they must share (the table, its options, the
    /// partition, the world size, a model's settings).
    #[error("ranks disagree on `{field}` ({values}){}", others_note(others))]
    Mismatch {
        /// The first field that differs.
        field: String,
        /// Each rank's value of that field.
        values: String,
        /// The other fields that differ, if any.
        others: Vec<String>,
    },
    /// A cache that cannot be built.
    #[error("invalid cache: {0}")]
    InvalidCache(String),
    /// Modified cache lines could not be written back to host memory (nothing changed).
    #[error("cache write-back: {0}")]
    WriteBack(String),
    /// A partition that cannot be built.
    #[error("invalid partition: {0}")]
    InvalidPartition(String),
    /// An option that is not available.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// The kernel layer refused or failed.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A collective failed (a peer failed, timed out, or the transport broke).
    #[error(transparent)]
    Comm(#[from] CommError),
    /// Training data could not be read.
    #[error(transparent)]
    Data(#[from] crate::data::DataError),
}

fn others_note(others: &[String]) -> String {
    if others.is_empty() {
        String::new()
    } else {
        format!("; these differ too: {}", others.join(", "))
    }
}
