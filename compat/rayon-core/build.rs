// `links = "rayon-core"` needs a build script; like rayon-core's, this one links nothing. The
// key only guarantees that one rayon-core is in the dependency graph.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
