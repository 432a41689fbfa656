// The age v1 file format: see AgeFile.swift and friends (being written).
