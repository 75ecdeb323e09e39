//! What a command pays to read the embedded kernel tables it times from, each from a fresh
//! catalog (as the first lookup of a process does): the head of each of the H100's tables
//! with one lookup in its first variant (which decodes that variant's rows), and each table
//! whole (what `kernels show` and the table tests decode).

// A bench target: a panic with a message is its failure report.
#![allow(clippy::expect_used)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use perfcast_kernels::Op;

fn decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    g.sample_size(20);
    for op in Op::ALL {
        let whole = perfcast_kernel_data::catalog()
            .expect("embedded tables")
            .get("h100_sxm", op)
            .expect("an H100 table")
            .table()
            .expect("a table that decodes");
        let first = &whole.rows[0];
        let key: Vec<&str> = (0..whole.values.len())
            .map(|i| whole.value(first, i))
            .collect();
        let shape = &first.shape[..op.schema().shape.len()];
        g.bench_function(format!("h100_sxm/{}/one-variant", op.name()), |b| {
            b.iter(|| {
                let cat = perfcast_kernel_data::catalog().expect("embedded tables");
                let t = cat.get("h100_sxm", op).expect("an H100 table");
                black_box(t.time(&key, shape).expect("a measured row"))
            })
        });
        g.bench_function(format!("h100_sxm/{}/whole", op.name()), |b| {
            b.iter(|| {
                let cat = perfcast_kernel_data::catalog().expect("embedded tables");
                let t = cat.get("h100_sxm", op).expect("an H100 table");
                black_box(t.table().expect("a table that decodes").rows.len())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
