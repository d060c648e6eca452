//! Knowledge-graph data: the common triples format (`head<TAB>relation<TAB>tail` per line, in
//! `train.txt`, `valid.txt` and `test.txt` of a folder), read into id triples over vocabularies
//! built from the training split.
//!
//! Entities and relations are numbered in sorted order of their names (as dicee does), so the
//! numbering does not depend on line order. Valid and test triples whose entity or relation never
//! occurs in training cannot be scored by a model trained on that split: they are left out and
//! counted ([`Dataset::unseen`]), the usual choice (PyKEEN, LibKGE).
//!
//! A graph too large for memory is first prepared ([`prepare`], `rowshard prepare`): the
//! vocabularies as name lists and the splits as binary triples ([`binary`]); training then
//! reads its triples a block at a time ([`Dataset::read_train`]).

pub mod binary;
mod dataset;
mod error;
mod load;
pub mod prepared;
pub mod synth;
mod text;
mod triple;

pub use binary::TripleFile;
pub use dataset::{Dataset, Split, Unseen, UnseenPolicy, vocabulary_digest};
pub use error::DataError;
pub use prepared::{Prepared, prepare};
pub use synth::{SynthSpec, write_synthetic};
pub use triple::Triple;
