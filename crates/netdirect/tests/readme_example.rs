//! README.md's code excerpt is a verbatim slice of `examples/hello_rdma.rs`, so the code the
//! README shows is the code CI compiles (`cargo clippy --all-targets`) and the example runs.

#[test]
fn readme_excerpt_is_part_of_hello_rdma() {
    let readme = include_str!("../../../README.md");
    let example = include_str!("../examples/hello_rdma.rs");
    let start = readme
        .find("```rust\n")
        .expect("README has a ```rust block")
        + "```rust\n".len();
    let len = readme[start..].find("```").expect("the block ends");
    let excerpt: Vec<&str> = readme[start..start + len].lines().map(str::trim).collect();
    let lines: Vec<&str> = example.lines().map(str::trim).collect();
    assert!(
        lines
            .windows(excerpt.len())
            .any(|w| w == excerpt.as_slice()),
        "README.md's excerpt is not a slice of examples/hello_rdma.rs: copy it again"
    );
}
