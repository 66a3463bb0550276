"""The text front end every front end shares: markup and dialogue parsed with positions, sentences
split and packed into chunks, pronunciation rules applied, and the chunks' audio joined into one take."""
