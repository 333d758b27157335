"""The worker process that decodes untrusted batches on the GPU, started by
the engine as ``python -m zarrs_nvcomp._gpu_worker``: a corrupt chunk that
makes nvCOMP fault or hang takes down this process and its CUDA context, not
the user's (see the README's "Corrupt input")."""

from zarrs_nvcomp._zarrs_nvcomp import _serve_gpu_worker

if __name__ == "__main__":
    _serve_gpu_worker()
