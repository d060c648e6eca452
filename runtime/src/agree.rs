//! Agreeing on a description across ranks before anything is allocated: every rank sends its
//! `(field, value)` pairs, and ranks that differ are told which fields differ and how.

use crate::comm::Communicator;
use crate::error::ShardError;

/// Checks that every rank passed the same `fields`; a collective. On a difference every rank
/// returns [`ShardError::Mismatch`] naming the first field that differs and each rank's value of
/// it (and how many other fields differ), never the whole description.
pub fn agree_on(comm: &dyn Communicator, fields: &[(&str, String)]) -> Result<(), ShardError> {
    let encoded: String = fields
        .iter()
        .map(|(name, value)| format!("{name}\t{}\n", value.replace('\n', " ")))
        .collect();
    let views = comm.all_gather(encoded.as_bytes())?;
    let views: Vec<Vec<(String, String)>> = views.iter().map(|v| decode(v)).collect();
    let mut differing = Vec::new();
    for (i, (name, _)) in fields.iter().enumerate() {
        let values: Vec<&str> = views
            .iter()
            .map(|v| v.get(i).map_or("(missing)", |(_, value)| value.as_str()))
            .collect();
        if values.iter().any(|v| *v != values[0]) {
            differing.push((name.to_string(), values));
        }
    }
    let Some((field, values)) = differing.first() else {
        return Ok(());
    };
    let values = values
        .iter()
        .enumerate()
        .map(|(rank, v)| format!("rank {rank}: {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(ShardError::Mismatch {
        field: field.clone(),
        values,
        others: differing[1..].iter().map(|(f, _)| f.clone()).collect(),
    })
}

fn decode(bytes: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|line| {
            let (name, value) = line.split_once('\t').unwrap_or((line, ""));
            (name.to_string(), value.to_string())
        })
        .collect()
}
