//! Writing an `f32` result into a lower-precision weight: round to nearest, or stochastically.

use cubecl::prelude::*;

/// A 32-bit integer hash with good avalanche (Wellons' "lowbias32").
#[cube]
pub fn hash_u32<N: Size>(x: Vector<u32, N>) -> Vector<u32, N> {
    let mut h = x;
    h ^= h >> Vector::new(16u32);
    h *= Vector::new(0x7feb_352du32);
    h ^= h >> Vector::new(15u32);
    h *= Vector::new(0x846c_a68bu32);
    h ^= h >> Vector::new(16u32);
    h
}

/// Rounds `x` stochastically to a type that keeps all but the low `dropped_bits` mantissa bits of
/// an `f32`, so the result is exactly representable there and `E[result] = x`.
///
/// The random bits are a hash of (`seed`, `step`, `element`), where `element` holds each lane's
/// global element index: the same seed, step and row always round the same way. Values below the
/// target's normal range (f16 subnormals) fall back to round-to-nearest.
#[cube]
pub fn stochastic_round<N: Size>(
    x: Vector<f32, N>,
    element: Vector<u32, N>,
    seed: u32,
    step: u32,
    #[comptime] dropped_bits: u32,
) -> Vector<f32, N> {
    let key = hash_u32::<N>(
        Vector::new(seed) ^ hash_u32::<N>(Vector::new(step) ^ hash_u32::<N>(element)),
    );
    let mask = Vector::new(comptime!((1u32 << dropped_bits) - 1));
    let bits = Vector::<u32, N>::reinterpret(x);
    let rounded = (bits + (key & mask)) & !mask;
    // A carry into the exponent field is fine: it is the next representable value up.
    let magnitude = bits & Vector::new(0x7fff_ffffu32);
    // f16's smallest normal is 2^-14 (biased f32 exponent 113); bf16 shares f32's range.
    let min_normal = Vector::new(comptime!(if dropped_bits == 13 {
        113u32 << 23
    } else {
        0u32
    }));
    let finite = Vector::new(0x7f80_0000u32);
    let keep = magnitude
        .less_than(&min_normal)
        .or(magnitude.greater_equal(&finite));
    let y = Vector::<f32, N>::reinterpret(rounded);
    select_many(keep, x, y)
}
