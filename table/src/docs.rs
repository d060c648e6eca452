//! `docs/optimizers.md`, generated from [`TABLE`]. A test fails when the committed file is stale.

use std::fmt::Write;

use crate::{DType, StateShape, TABLE};

/// The markdown of `docs/optimizers.md`.
pub fn optimizers_markdown() -> String {
    let mut md = String::new();
    let names = |d: &[DType]| {
        d.iter()
            .map(|d| format!("`{}`", d.name()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    md.push_str("# Optimizers\n\n");
    md.push_str(
        "<!-- Generated from the optimizer table in table/src/optimizer.rs by \
         `ROWSHARD_BLESS=1 cargo test -p rowshard-tests --test docs`; do not edit. -->\n\n",
    );
    md.push_str(
        "Every optimizer updates only the rows a step touches (lazy), sums duplicate-id gradients \
         in input order before the update, and does its math in `f32` whatever the storage dtype. \
         `lr` is passed with each step. Weights in `f16`/`bf16` are rounded to nearest, or \
         stochastically (`stochastic_rounding`, reproducible from the table's seed, the step and \
         the element).\n\n",
    );
    md.push_str("| optimizer | name | hyper-parameters (default, range) | states | weight dtypes | state dtypes |\n");
    md.push_str("|---|---|---|---|---|---|\n");
    for spec in TABLE {
        let hps = spec
            .hyper_parameters
            .iter()
            .map(|h| format!("`{}` ({}, {})", h.name, h.default, h.range))
            .collect::<Vec<_>>()
            .join("<br>");
        let states = spec
            .states
            .iter()
            .map(|s| {
                let shape = match s.shape {
                    StateShape::PerElement => "per element",
                    StateShape::PerRow => "per row",
                };
                format!("`{}` ({shape})", s.name)
            })
            .collect::<Vec<_>>()
            .join("<br>");
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {} | {} |",
            spec.title,
            spec.name,
            if hps.is_empty() { "—".into() } else { hps },
            if states.is_empty() {
                "—".into()
            } else {
                states
            },
            names(spec.weight_dtypes),
            names(spec.state_dtypes),
        );
    }
    for spec in TABLE {
        let _ = writeln!(md, "\n## {} (`{}`)\n", spec.title, spec.name);
        md.push_str("```text\n");
        for line in spec.rule {
            let _ = writeln!(md, "{line}");
        }
        md.push_str("```\n");
        for h in spec.hyper_parameters {
            let _ = writeln!(
                md,
                "- `{}` = {} in {}: {}",
                h.name, h.default, h.range, h.doc
            );
        }
        for s in spec.states {
            let _ = writeln!(md, "- state `{}`: {}", s.name, s.doc);
        }
        if spec.bias_clocks {
            md.push_str("- option `bias_clock`: `per_row` (default; WholeGraph) or `global` (torch SparseAdam, dicee)\n");
        }
        if spec.decoupled_weight_decay {
            md.push_str("- option `decoupled_weight_decay`: AdamW's `w -= lr*wd*w` instead of `g += wd*w`\n");
        }
    }
    md
}
