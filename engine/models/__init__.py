"""Models a user fetches and keeps: the released checkpoints by alias (catalog), the hub download
with verification (hub), the local registry of converted files (registry), and `kazeia pull`'s
steps from one to the other (pull: pull_model). Import the submodules; this package imports
nothing, so resolving a model name does not load huggingface_hub."""
