//! Agreeing on a description across ranks before anything is allocated: every rank sends its
//! `(field, value)` pairs, and ranks that differ are told which fields differ and how.

use crate::comm::{Communicator, from_bytes, to_bytes};
use crate::error::{InputError, ShardError};

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

/// Agrees on every rank's input check, a collective: every rank returns the first rank's error
/// (tagged with that rank), or all go on.
pub fn agree_on_input(
    comm: &dyn Communicator,
    verdict: Option<InputError>,
) -> Result<(), ShardError> {
    let words = verdict.map_or([0; 3], |e| e.encode());
    let views = comm.all_gather(&to_bytes(&words))?;
    for (rank, view) in views.iter().enumerate() {
        let w: Vec<u64> = from_bytes(view);
        if let Some(error) = w
            .get(..3)
            .and_then(|w| InputError::decode([w[0], w[1], w[2]]))
        {
            return Err(ShardError::BadInput { rank, error });
        }
    }
    Ok(())
}

/// Every rank's `value`, a collective.
pub fn all_values(comm: &dyn Communicator, value: u64) -> Result<Vec<u64>, ShardError> {
    let views = comm.all_gather(&to_bytes(&[value]))?;
    Ok(views.iter().map(|v| from_bytes::<u64>(v)[0]).collect())
}

/// The sum over ranks of `value`, in rank order (the same bits on every rank), a collective.
pub fn sum_f64(comm: &dyn Communicator, value: f64) -> Result<f64, ShardError> {
    let views = comm.all_gather(&to_bytes(&[value]))?;
    Ok(views.iter().map(|v| from_bytes::<f64>(v)[0]).sum())
}
