//! `cargo run -p partita-sim --release --example simulate -- [bandwidth|policies|all] [--svg-dir DIR]`:
//! what `partita simulate` prints, until the CLI wires it.

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: partita_sim::SimulateArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = partita_sim::run(&cli.args) {
        eprintln!("partita simulate: {e}");
        std::process::exit(2);
    }
}
