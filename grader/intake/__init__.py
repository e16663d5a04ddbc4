"""A submission taken in: opened whether it is a folder, an archive or the student files alone
(submission), its student files copied into a staging tree (staging), and the intake stage (stage)."""
