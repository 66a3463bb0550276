"""Voices: profiles from reference audio (voice), the one reader and writer of .kzvoice files
(voice_profile), the user's library (voice_library), a take's voice kept (keep_voice) and a script's
cast of voices (cast)."""
