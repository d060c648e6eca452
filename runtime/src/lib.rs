//! rowshard
