//! A table written a block of rows at a time ([`LocalTable::new_in_blocks`]) equals the same
//! table built whole, weights to the bit and optimizer states zero, across block boundaries.

use rowshard_kernels::local_table::INIT_BLOCK_ROWS;
use rowshard_kernels::{Backend, DType, KernelError, LocalTable, Optimizer, TableConfig};

/// Row `r`'s initial weights: distinct, and not all representable in 16 bits.
fn init_row(r: usize, dim: usize, out: &mut Vec<f32>) {
    out.extend((0..dim).map(|k| ((r * 31 + k * 7) % 997) as f32 / 997.0 - 0.5));
}

#[test]
fn a_table_written_in_blocks_equals_one_built_whole() {
    let client = Backend::Cpu.client().unwrap();
    let rows = INIT_BLOCK_ROWS + 37;
    for (optimizer, dtype, dim) in [
        (Optimizer::Adam, DType::F32, 4),
        (Optimizer::RowWiseAdaGrad, DType::BF16, 6),
        // Rows of 6 bytes are not whole words: written at once.
        (Optimizer::Sgd, DType::F16, 3),
    ] {
        let config = TableConfig::new(optimizer, dtype, dim);
        let mut calls = Vec::new();
        let blocks = LocalTable::new_in_blocks(&client, config, rows, |range, out| {
            calls.push(range.clone());
            range.for_each(|r| init_row(r, dim, out));
        })
        .unwrap();
        let what = format!("{optimizer:?} {dtype:?} dim {dim}");
        let covered: Vec<usize> = calls.iter().flat_map(|r| r.clone()).collect();
        assert_eq!(
            covered,
            (0..rows).collect::<Vec<_>>(),
            "{what}: rows in order"
        );
        let expected_calls = if dim == 3 { 1 } else { 2 };
        assert_eq!(calls.len(), expected_calls, "{what}: blocks");
        let mut init = Vec::new();
        (0..rows).for_each(|r| init_row(r, dim, &mut init));
        let whole = LocalTable::new(&client, config, rows, &init).unwrap();
        let bits = |w: Vec<f32>| w.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(
            bits(blocks.weights().unwrap()) == bits(whole.weights().unwrap()),
            "{what}: weights"
        );
        for name in blocks.state_names() {
            let state = blocks.state(name).unwrap();
            assert_eq!(
                state.len(),
                whole.state(name).unwrap().len(),
                "{what}: {name}"
            );
            assert!(
                state.iter().all(|&x| x == 0.0),
                "{what}: state {name} not zero"
            );
        }
    }
}

#[test]
fn an_initialiser_of_the_wrong_length_is_refused() {
    let client = Backend::Cpu.client().unwrap();
    let config = TableConfig::new(Optimizer::AdaGrad, DType::F32, 8);
    let err = LocalTable::new_in_blocks(&client, config, 100, |range, out| {
        range.for_each(|r| init_row(r, 7, out));
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            KernelError::ShapeMismatch {
                expected: 800,
                got: 700,
                ..
            }
        ),
        "{err:?}"
    );
}
