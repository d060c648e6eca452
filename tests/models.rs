//! The shipped models' generated kernels against hand-written `f64` references of the published
//! formulas: forward (scores), backward (central finite differences of the reference), the
//! query kernel of scores linear in the tail (`⟨q, t⟩` is the score), and the generated host
//! functions. On the `cpu` runtime, several triples at once with rows shared between them.

use rowshard::model::{HostGradient, ScoreKernels, ScoringFunction, relation_dim};
use rowshard::models::{ComplEx, DistMult, QMult, RotatE, TransE, TransEL2};
use rowshard_kernels::{Backend, DType};
use rowshard_tests::data::Rng;
use rowshard_tests::scores::{self, Score, finite_differences};

const TRIPLES: usize = 7;
const DIM: usize = 16;

fn close(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol * (1.0 + want.abs()),
        "{what}: got {got}, want {want}"
    );
}

fn check_model<S: ScoringFunction>(reference: Score) {
    let client = Backend::Cpu.client().unwrap();
    let rdim = relation_dim::<S>(DIM);
    let kernels = ScoreKernels::<S>::new(&client, DIM, DType::F32, DType::F32).unwrap();
    let mut rng = Rng::new(11);
    // Five entity rows and three relation rows, shared between the triples.
    let ent = rng.values(5 * DIM, -1.0, 1.0);
    let rel = rng.values(3 * rdim, -1.0, 1.0);
    let hi: Vec<u32> = (0..TRIPLES).map(|_| rng.below(5)).collect();
    let ri: Vec<u32> = (0..TRIPLES).map(|_| rng.below(3)).collect();
    let ti: Vec<u32> = (0..TRIPLES).map(|_| rng.below(5)).collect();
    let upstream: Vec<f32> = rng.values(TRIPLES, -2.0, 2.0);
    let ent_dev = kernels.upload_rows(&ent, DType::F32);
    let rel_dev = kernels.upload_rows(&rel, DType::F32);
    let triples = kernels.upload_triples(&hi, &ri, &ti);
    let scores = kernels
        .read(kernels.forward(&ent_dev, &rel_dev, &triples), TRIPLES)
        .unwrap();
    let up = client.create(cubecl::bytes::Bytes::from_elems(upstream.clone()));
    let [dh, dr, dt] = kernels.backward(&ent_dev, &rel_dev, &triples, &up);
    let dh = kernels.read(dh, TRIPLES * DIM).unwrap();
    let dr = kernels.read(dr, TRIPLES * rdim).unwrap();
    let dt = kernels.read(dt, TRIPLES * DIM).unwrap();
    let q = S::TAIL_LINEAR.is_ok().then(|| {
        kernels
            .read(
                kernels.query(&ent_dev, &rel_dev, &triples).unwrap(),
                TRIPLES * DIM,
            )
            .unwrap()
    });
    let row = |v: &[f32], i: u32, w: usize| -> Vec<f64> {
        v[i as usize * w..][..w].iter().map(|&x| x as f64).collect()
    };
    for k in 0..TRIPLES {
        let (h, r, t) = (
            row(&ent, hi[k], DIM),
            row(&rel, ri[k], rdim),
            row(&ent, ti[k], DIM),
        );
        let name = format!("{} triple {k}", S::NAME);
        let want = reference(&h, &r, &t);
        close(&format!("{name} forward"), scores[k] as f64, want, 1e-5);
        close(
            &format!("{name} host score"),
            S::score_host(&h, &r, &t),
            want,
            1e-12,
        );
        let fd = finite_differences(reference, &h, &r, &t);
        let HostGradient {
            head,
            relation,
            tail,
            score,
        } = S::gradient_host(&h, &r, &t);
        close(&format!("{name} host gradient's score"), score, want, 1e-12);
        let u = upstream[k] as f64;
        for (which, (kernel, host, fd, w)) in [
            ("head", (&dh, &head, &fd[0], DIM)),
            ("relation", (&dr, &relation, &fd[1], rdim)),
            ("tail", (&dt, &tail, &fd[2], DIM)),
        ] {
            for i in 0..w {
                let at = format!("{name} ∂/∂{which}[{i}]");
                close(&format!("{at} host"), host[i], fd[i], 1e-6);
                close(
                    &format!("{at} kernel"),
                    kernel[k * w + i] as f64,
                    u * fd[i],
                    1e-4,
                );
            }
        }
        if let Some(q) = &q {
            let qt: f64 = (0..DIM).map(|i| q[k * DIM + i] as f64 * t[i]).sum();
            close(&format!("{name} ⟨q, t⟩"), qt, want, 1e-5);
        }
    }
}

#[test]
fn distmult_matches_its_formula_and_finite_differences() {
    check_model::<DistMult>(scores::distmult);
}

#[test]
fn complex_matches_its_formula_and_finite_differences() {
    check_model::<ComplEx>(scores::complex);
}

#[test]
fn transe_matches_its_formula_and_finite_differences() {
    check_model::<TransE>(scores::transe);
    check_model::<TransEL2>(scores::transe_l2);
}

#[test]
fn rotate_matches_its_formula_and_finite_differences() {
    check_model::<RotatE>(scores::rotate);
}

#[test]
fn qmult_matches_its_formula_and_finite_differences() {
    check_model::<QMult>(scores::qmult);
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
    assert!(
        RotatE::TAIL_LINEAR
            .unwrap_err()
            .contains("multiplies two expressions")
    );
    assert_eq!(RotatE::RELATION_WIDTH, (1, 2));
    assert_eq!(
        (ComplEx::SEGMENTS, QMult::SEGMENTS, DistMult::SEGMENTS),
        (2, 4, 1)
    );
}
