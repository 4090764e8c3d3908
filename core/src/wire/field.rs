//! The field tables' vocabulary: the JSON type of one field of an event or command, as the
//! validator checks it and the JSON Schema states it.

/// The JSON type of one field, as the validator checks it and the schema states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// A JSON string.
    String,
    /// A JSON boolean.
    Bool,
    /// A non-negative integer.
    UInt,
    /// A non-negative integer or `null`.
    UIntOrNull,
    /// A JSON object.
    Object,
    /// An array of strings.
    StringArray,
    /// An array of [`super::event::FreezeChange`] objects.
    ChangeArray,
}

/// One field of an event type.
#[derive(Debug, Clone, Copy)]
pub struct FieldSpec {
    /// The field's key.
    pub name: &'static str,
    /// Its JSON type.
    pub ty: FieldType,
    /// Whether every line of the type must carry it.
    pub required: bool,
    /// Legal values for an enumerated string field (empty: any string).
    pub values: &'static [&'static str],
}
