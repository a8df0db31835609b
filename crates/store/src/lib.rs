//! SQLite implementation of the store trait (being written).
