//! The generated model kernels and training steps on the `wgpu` runtime (Vulkan; Mesa lavapipe
//! without a GPU): the same checks as on `cpu` (`model_suite.rs`), with rows in f32 and f16.

use rowshard::models::{ComplEx, DistMult, QMult, RotatE, RotatESq, TransE, TransESq};
use rowshard_kernels::{Backend, DType};
use rowshard_tests::model_suite::{
    check_kvsall_step, check_model, check_shared_negatives_step, check_softmax_step,
    check_triples_step,
};
use rowshard_tests::scores;

#[test]
fn generated_kernels_match_their_formulas_on_wgpu() {
    for dtype in [DType::F32, DType::F16] {
        check_model::<DistMult>(Backend::Wgpu, dtype, scores::distmult);
        check_model::<ComplEx>(Backend::Wgpu, dtype, scores::complex);
    }
    check_model::<TransE>(Backend::Wgpu, DType::F32, scores::transe);
    check_model::<RotatE>(Backend::Wgpu, DType::F32, scores::rotate);
    check_model::<QMult>(Backend::Wgpu, DType::F32, scores::qmult);
}

#[test]
fn training_steps_equal_the_host_steps_on_wgpu() {
    check_triples_step::<RotatE>(Backend::Wgpu, scores::rotate);
    check_kvsall_step::<ComplEx>(Backend::Wgpu, scores::complex);
    check_softmax_step::<ComplEx>(Backend::Wgpu, scores::complex, 0.05, (0.0, 0.0));
    for batch in [false, true] {
        check_shared_negatives_step::<ComplEx>(
            Backend::Wgpu,
            scores::complex,
            0.05,
            &[1, 6, 10, 16, 19],
            batch,
        );
    }
    // The self-adversarial loss over shared negatives; a squared distance: dense products of
    // augmented rows.
    rowshard_tests::model_suite::check_adversarial_step::<RotatESq>(
        Backend::Wgpu,
        scores::rotate_sq,
        &[1, 6, 10, 16, 19],
        0.5,
    );
    // Margin ranking over shared negatives, with several true tails per query.
    rowshard_tests::model_suite::check_margin_step::<ComplEx>(
        Backend::Wgpu,
        scores::complex,
        &[1, 6, 10, 16, 19],
        0.05,
    );
    // Chunks of the batch, each with its own negatives; a plain distance pair by pair.
    let lists: [&[u32]; 3] = [&[1, 6], &[10, 16, 19], &[0, 5]];
    rowshard_tests::model_suite::check_chunked_steps::<ComplEx>(
        Backend::Wgpu,
        scores::complex,
        &lists,
        2,
    );
    rowshard_tests::model_suite::check_logistic_step::<TransE>(
        Backend::Wgpu,
        scores::transe,
        &[1, 6, 10, 16, 19],
    );
    check_softmax_step::<RotatESq>(Backend::Wgpu, scores::rotate_sq, 0.0, (0.0, 0.0));
    check_shared_negatives_step::<TransESq>(
        Backend::Wgpu,
        scores::transe_sq,
        0.05,
        &[1, 6, 10, 16, 19],
        false,
    );
}
