//! The `#[sharded_embedding]` attribute macro (not yet implemented).
