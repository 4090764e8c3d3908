//! The stream validator: the contract's executable form (filled in by the validator work).
