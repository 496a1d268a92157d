//! The effect words of `capabilities.schema.json`: what a backend may ask the harness to
//! enforce, and what the harness advertises it can.

words! {
    /// One effect type, as in an effect's `type` and in `capabilities.effects`.
    pub enum EffectKind {
        Deny = "deny",
        Allow = "allow",
        Ask = "ask",
        Message = "message",
        Modify = "modify",
        Flow = "flow",
        Return = "return",
        Inject = "inject",
    }
}
