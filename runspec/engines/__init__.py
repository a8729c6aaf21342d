"""runspec and the engines that rent machines for it (SkyPilot, dstack, Hugging Face Jobs)."""
