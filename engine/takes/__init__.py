"""Takes kept and listened to: a take's record (take_record), blind ABX and preference tests
(blind_test) and loudness (BS.1770, the one gain for matching takes and books)."""
