//! The shipped models' generated kernels on the `cpu` runtime (rows in f32 and bf16) against
//! hand-written `f64` references of the published formulas: forward, backward (central finite
//! differences of the reference), the query kernel of scores linear in the tail (`⟨q, t⟩` is the
//! score), and the generated host functions. See `model_suite.rs`.

use rowshard::model::ScoringFunction;
use rowshard::models::{ComplEx, DistMult, QMult, RotatE, RotatESq, TransE, TransEL2, TransESq};
use rowshard_kernels::{Backend, DType};
use rowshard_tests::model_suite::check_model;
use rowshard_tests::scores;

#[test]
fn distmult_matches_its_formula_and_finite_differences() {
    check_model::<DistMult>(Backend::Cpu, DType::F32, scores::distmult);
    check_model::<DistMult>(Backend::Cpu, DType::BF16, scores::distmult);
}

#[test]
fn complex_matches_its_formula_and_finite_differences() {
    check_model::<ComplEx>(Backend::Cpu, DType::F32, scores::complex);
    check_model::<ComplEx>(Backend::Cpu, DType::F16, scores::complex);
}

#[test]
fn transe_matches_its_formula_and_finite_differences() {
    check_model::<TransE>(Backend::Cpu, DType::F32, scores::transe);
    check_model::<TransEL2>(Backend::Cpu, DType::F32, scores::transe_l2);
}

#[test]
fn rotate_matches_its_formula_and_finite_differences() {
    check_model::<RotatE>(Backend::Cpu, DType::F32, scores::rotate);
}

#[test]
fn qmult_matches_its_formula_and_finite_differences() {
    check_model::<QMult>(Backend::Cpu, DType::F32, scores::qmult);
}

#[test]
fn only_scores_linear_in_the_tail_have_a_query() {
    assert!(
        DistMult::TAIL_LINEAR.is_ok() && ComplEx::TAIL_LINEAR.is_ok() && QMult::TAIL_LINEAR.is_ok()
    );
    assert!(
        TransE::TAIL_LINEAR
            .unwrap_err()
            .contains("`norm_l1` is not linear")
    );
    assert!(
        TransEL2::TAIL_LINEAR
            .unwrap_err()
            .contains("`norm_l2` is not linear")
    );
    // The squared moduli are quadratic in the tail; their square roots are what break it.
    assert!(
        RotatE::TAIL_LINEAR
            .unwrap_err()
            .contains("`sqrt` is not linear")
    );
    let quadratic = [
        RotatE::TAIL_QUADRATIC,
        TransE::TAIL_QUADRATIC,
        DistMult::TAIL_QUADRATIC,
        RotatESq::TAIL_QUADRATIC,
        TransESq::TAIL_QUADRATIC,
    ];
    assert_eq!(quadratic, [false, false, false, true, true]);
    assert!(
        RotatESq::TAIL_LINEAR
            .unwrap_err()
            .contains("multiplies two expressions")
    );
    assert_eq!(RotatE::RELATION_WIDTH, (1, 2));
    assert_eq!(
        (ComplEx::SEGMENTS, QMult::SEGMENTS, DistMult::SEGMENTS),
        (2, 4, 1)
    );
}
