//! The unit of every split: a triple of ids.

/// A triple of ids: head entity, relation, tail entity.
pub type Triple = [u32; 3];
