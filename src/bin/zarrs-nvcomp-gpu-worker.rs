//! The worker process that decodes untrusted batches on the GPU for
//! `zarrs_nvcomp` (see `zarrs_nvcomp::cuda::isolation`); started by the
//! engine, it serves requests on its standard input and output.

fn main() -> std::io::Result<()> {
    zarrs_nvcomp::cuda::isolation::serve_worker(std::io::stdin().lock(), std::io::stdout().lock())
}
