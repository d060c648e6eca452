//! The text of a recipe's values, as the command line and a recipe file write them
//! (`n3:0.05`, `uniform:1024,batch`, `normal:0.001`, `exp:0.9`): each value type parsed and
//! printed in one place ([`Text`]), so that a value read from a file, given as a flag or written
//! back by a search is the same text.

use std::fmt::Display;
use std::str::FromStr;

use rowshard_kernels::{Backend, DType};

use crate::data::UnseenPolicy;
use crate::model::InitScheme;
use crate::negatives::Negatives;
use crate::objective::{LossName, Mode, Regularizer};
use crate::partition::PartitionScheme;
use crate::train::{CommKind, LrSchedule};

/// A value with a text form: parsed from a flag or a recipe, printed back the same way.
pub trait Text: Sized {
    /// Parses the text, or says what is wrong with it (the message clap prints after "invalid
    /// value '…' for '--flag'").
    fn parse(s: &str) -> Result<Self, String>;
    /// The text that parses back to this value.
    fn text(&self) -> String;
}

/// [`Text::parse`] as a clap value parser.
pub fn parse<T: Text>(s: &str) -> Result<T, String> {
    T::parse(s)
}

/// Serialises an optional value as its text (for `#[serde(serialize_with)]`).
pub fn serialize_text<T: Text, S: serde::Serializer>(
    value: &Option<T>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => serializer.serialize_some(&v.text()),
        None => serializer.serialize_none(),
    }
}

/// A number with a range: the flags' bounded numbers.
fn number<T: FromStr + PartialOrd + Display + Copy>(
    s: &str,
    ok: impl Fn(T) -> bool,
    what: &str,
) -> Result<T, String> {
    match s.trim().parse::<T>() {
        Ok(v) if ok(v) => Ok(v),
        _ => Err(format!("`{s}` is not {what}")),
    }
}

/// A finite number > 0.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, serde::Serialize)]
#[serde(transparent)]
pub struct Positive(pub f64);

/// A finite number ≥ 0.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, serde::Serialize)]
#[serde(transparent)]
pub struct NonNegative(pub f64);

/// A number in `[0, 1)`: label smoothing, dropout.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Fraction(pub f32);

impl serde::Serialize for Fraction {
    /// As the shortest decimal of the `f32` (0.1, not 0.10000000149011612).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let decimal: f64 = self.0.to_string().parse().unwrap_or(self.0 as f64);
        serializer.serialize_f64(decimal)
    }
}

/// A share in `(0, 1]`.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, serde::Serialize)]
#[serde(transparent)]
pub struct Share(pub f64);

/// A whole number ≥ 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Count(pub u32);

impl Text for Positive {
    fn parse(s: &str) -> Result<Self, String> {
        number(s, |v: f64| v.is_finite() && v > 0.0, "a finite number > 0").map(Positive)
    }
    fn text(&self) -> String {
        self.0.to_string()
    }
}

impl Text for NonNegative {
    fn parse(s: &str) -> Result<Self, String> {
        number(s, |v: f64| v.is_finite() && v >= 0.0, "a finite number ≥ 0").map(NonNegative)
    }
    fn text(&self) -> String {
        self.0.to_string()
    }
}

impl Text for Fraction {
    fn parse(s: &str) -> Result<Self, String> {
        number(s, |v: f32| (0.0..1.0).contains(&v), "in [0, 1)").map(Fraction)
    }
    fn text(&self) -> String {
        self.0.to_string()
    }
}

impl Text for Share {
    fn parse(s: &str) -> Result<Self, String> {
        number(s, |v: f64| v > 0.0 && v <= 1.0, "in (0, 1]").map(Share)
    }
    fn text(&self) -> String {
        self.0.to_string()
    }
}

impl Text for Count {
    fn parse(s: &str) -> Result<Self, String> {
        number(s, |v: u32| v >= 1, "a whole number ≥ 1").map(Count)
    }
    fn text(&self) -> String {
        self.0.to_string()
    }
}

impl Text for DType {
    fn parse(s: &str) -> Result<Self, String> {
        DType::from_name(s)
            .ok_or_else(|| format!("unknown dtype `{s}`; expected one of: f32, f16, bf16"))
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Text for Backend {
    fn parse(s: &str) -> Result<Self, String> {
        Backend::from_name(s)
            .ok_or_else(|| format!("unknown runtime `{s}`; expected one of: cpu, wgpu, cuda"))
    }
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Text for PartitionScheme {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "even" => Ok(PartitionScheme::Even),
            "round-robin" => Ok(PartitionScheme::RoundRobin { block: 1 }),
            _ => Err(format!(
                "unknown partition `{s}`; expected even or round-robin"
            )),
        }
    }
    fn text(&self) -> String {
        self.name().to_string()
    }
}

impl Text for Mode {
    /// `kvsall`, `1vsall` or `negsample` (its corruptions per triple are a key of their own).
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "kvsall" => Ok(Mode::KvsAll),
            "1vsall" => Ok(Mode::OneVsAll),
            "negsample" => Ok(Mode::NegSample { neg_ratio: 0 }),
            _ => Err(format!(
                "unknown mode `{s}`; expected one of: kvsall, 1vsall, negsample"
            )),
        }
    }
    fn text(&self) -> String {
        self.name().to_string()
    }
}

impl Text for LossName {
    fn parse(s: &str) -> Result<Self, String> {
        s.parse()
    }
    fn text(&self) -> String {
        self.name().to_string()
    }
}

impl Text for CommKind {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(CommKind::Auto),
            "threads" => Ok(CommKind::Threads),
            "mpi" => Ok(CommKind::Mpi),
            _ => Err(format!(
                "unknown comm `{s}`; expected one of: auto, threads, mpi"
            )),
        }
    }
    fn text(&self) -> String {
        self.name().to_string()
    }
}

impl Text for UnseenPolicy {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "drop" => Ok(UnseenPolicy::Drop),
            "count" => Ok(UnseenPolicy::Count),
            _ => Err(format!("unknown policy `{s}`; expected drop or count")),
        }
    }
    fn text(&self) -> String {
        self.name().to_string()
    }
}

impl Text for Regularizer {
    fn parse(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "unknown regulariser `{s}`; expected none, n3:WEIGHT, l2:WEIGHT or \
                 l2:WEIGHT,weighted (WEIGHT ≥ 0)"
            )
        };
        let weight = |w: &str| NonNegative::parse(w).map(|w| w.0).map_err(|_| bad());
        match s.split_once(':') {
            None if s == "none" => Ok(Regularizer::None),
            Some(("n3", w)) => Ok(Regularizer::N3 { weight: weight(w)? }),
            Some(("l2", rest)) => match rest.split_once(',') {
                None => Ok(Regularizer::L2 {
                    weight: weight(rest)?,
                    weighted: false,
                }),
                Some((w, "weighted")) => Ok(Regularizer::L2 {
                    weight: weight(w)?,
                    weighted: true,
                }),
                Some(_) => Err(bad()),
            },
            _ => Err(bad()),
        }
    }
    fn text(&self) -> String {
        match *self {
            Regularizer::None => "none".into(),
            Regularizer::N3 { weight } => format!("n3:{weight}"),
            Regularizer::L2 {
                weight,
                weighted: false,
            } => format!("l2:{weight}"),
            Regularizer::L2 {
                weight,
                weighted: true,
            } => format!("l2:{weight},weighted"),
        }
    }
}

impl Text for LrSchedule {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "constant" => Ok(LrSchedule::Constant),
            "cosine" => Ok(LrSchedule::Cosine),
            _ => match s.strip_prefix("exp:").map(str::parse::<f64>) {
                Some(Ok(gamma)) if gamma > 0.0 && gamma <= 1.0 => {
                    Ok(LrSchedule::Exponential { gamma })
                }
                _ => Err(format!(
                    "unknown schedule `{s}`; expected constant, cosine or exp:GAMMA with 0 < \
                     GAMMA ≤ 1"
                )),
            },
        }
    }
    fn text(&self) -> String {
        match *self {
            LrSchedule::Constant => "constant".into(),
            LrSchedule::Cosine => "cosine".into(),
            LrSchedule::Exponential { gamma } => format!("exp:{gamma}"),
        }
    }
}

impl Text for Negatives {
    /// `all`, or `uniform:N`, `degree:N` and `batch` separated by commas (the chunk is a key of
    /// its own).
    fn parse(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(Negatives::All);
        }
        let (mut uniform, mut degree, mut batch) = (0, 0, false);
        for part in s.split(',') {
            let count = |n: &str| match n.parse::<usize>() {
                Ok(count) if count > 0 => Ok(count),
                _ => Err(format!(
                    "`{n}` in `{s}`: a positive number of negatives is needed"
                )),
            };
            match part.split_once(':') {
                Some(("uniform", n)) => uniform = count(n)?,
                Some(("degree", n)) => degree = count(n)?,
                None if part == "batch" => batch = true,
                Some(("batch", n)) => {
                    return Err(format!(
                        "`{part}` in `{s}`: batch negatives are the true tails of the queries \
                         of a chunk; write batch and set the queries per chunk with --chunk \
                         {n} (PyTorch-BigGraph's num_batch_negs)"
                    ));
                }
                _ => {
                    return Err(format!(
                        "unknown negatives `{s}`; expected all, or uniform:N, degree:N and batch \
                         separated by commas (uniform:N,degree:M,batch)"
                    ));
                }
            }
        }
        Ok(Negatives::Shared {
            uniform,
            degree,
            batch,
            chunk: 0,
        })
    }
    fn text(&self) -> String {
        match *self {
            Negatives::All => "all".into(),
            Negatives::Shared {
                uniform,
                degree,
                batch,
                ..
            } => {
                let mut parts = Vec::new();
                if uniform > 0 {
                    parts.push(format!("uniform:{uniform}"));
                }
                if degree > 0 {
                    parts.push(format!("degree:{degree}"));
                }
                if batch {
                    parts.push("batch".into());
                }
                parts.join(",")
            }
        }
    }
}

impl Text for InitScheme {
    fn parse(s: &str) -> Result<Self, String> {
        let positive = |x: &str| Positive::parse(x).ok().map(|p| p.0);
        let bad = || {
            format!(
                "unknown initialisation `{s}`; expected normal:STD, uniform:BOUND, xavier or zeros"
            )
        };
        match s.split_once(':') {
            Some(("normal", x)) => positive(x)
                .map(|std| InitScheme::Normal { std })
                .ok_or_else(bad),
            Some(("uniform", x)) => positive(x)
                .map(|bound| InitScheme::Uniform { bound })
                .ok_or_else(bad),
            None if s == "xavier" => Ok(InitScheme::XavierNormal),
            None if s == "zeros" => Ok(InitScheme::Zeros),
            _ => Err(bad()),
        }
    }
    fn text(&self) -> String {
        match *self {
            InitScheme::Normal { std } => format!("normal:{std}"),
            InitScheme::Uniform { bound } => format!("uniform:{bound}"),
            InitScheme::XavierNormal => "xavier".into(),
            InitScheme::Zeros => "zeros".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value's text parses back to it.
    #[test]
    fn texts_parse_back() {
        fn round<T: Text + PartialEq + std::fmt::Debug>(s: &str) {
            let v = T::parse(s).unwrap();
            assert_eq!(T::parse(&v.text()).unwrap(), v, "{s}");
        }
        for s in ["none", "n3:0.05", "l2:0.1", "l2:0.1,weighted"] {
            round::<Regularizer>(s);
        }
        for s in ["all", "uniform:1024", "uniform:8,degree:8,batch", "batch"] {
            round::<Negatives>(s);
        }
        for s in ["normal:0.001", "uniform:0.1", "xavier", "zeros"] {
            round::<InitScheme>(s);
        }
        for s in ["constant", "cosine", "exp:0.9"] {
            round::<LrSchedule>(s);
        }
        round::<Mode>("1vsall");
        round::<LossName>("self-adversarial");
        assert!(Fraction::parse("1").is_err() && Count::parse("0").is_err());
        assert!(NonNegative::parse("-0.1").is_err() && Positive::parse("0").is_err());
    }
}
