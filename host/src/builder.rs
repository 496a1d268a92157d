//! The middle layer: an [`crate::Interceptor`] on an existing `Engine` (or a default one), with
//! a `Component` compiled for it or precompiled bytes.

use crate::error::Error;
use crate::linker::check_engine;
use crate::options::Options;
use crate::runtime::{compile, default_engine, Epochs, Runtime, EMBEDDED_COMPONENT};
use std::sync::Arc;
use wasmtime::component::Component;
use wasmtime::Engine;

/// Builds an [`crate::Interceptor`] on the embedder's wasmtime pieces.
///
/// # Example
///
/// ```no_run
/// use ahp_host::wasmtime::component::Component;
/// use ahp_host::wasmtime::{Config, Engine};
/// use ahp_host::{Epochs, InterceptorBuilder, Options};
///
/// # async fn demo(registration: &str) -> Result<(), Box<dyn std::error::Error>> {
/// let mut config = Config::new();
/// config.epoch_interruption(true);
/// let engine = Engine::new(&config)?;
/// let component = Component::new(&engine, ahp_host::EMBEDDED_COMPONENT)?;
/// let interceptor = InterceptorBuilder::new()
///     .engine(&engine)
///     .component(component)
///     .options(Options::default())
///     .epochs(Epochs::Ticker)
///     .build(registration)
///     .await?;
/// # let _ = interceptor; Ok(()) }
/// ```
#[derive(Default)]
pub struct InterceptorBuilder {
    engine: Option<Engine>,
    component: Option<Code>,
    options: Options,
    epochs: Epochs,
}

/// The component as given to the builder.
enum Code {
    Compiled(Component),
    /// Output of `Engine::precompile_component`, trusted by the caller.
    Precompiled(Vec<u8>),
}

impl InterceptorBuilder {
    /// The embedded component on this crate's default Engine, default options.
    pub fn new() -> InterceptorBuilder {
        InterceptorBuilder::default()
    }

    /// Run on `engine`, which must have `Config::epoch_interruption(true)`. With the
    /// pooling allocator, its `total_component_instances` must cover
    /// [`Options::max_instances`] (default 512) of every interceptor on it, plus the
    /// embedder's own instances, and its `total_core_instances`, `total_tables` and
    /// `total_memories` what those take (each instance of the component has several core
    /// instances and tables and a memory; this crate's own Engine sets 2048, 2048 and
    /// 1024 for its 512, where wasmtime's defaults are 1000 each), and its `total_stacks`
    /// one fiber stack for each of those instances (a pooled instance's store keeps the
    /// one its first call took): a call beyond the Engine's capacity fails to instantiate
    /// or to run and settles as `engine-failure`, while one beyond `max_instances` waits
    /// its turn.
    pub fn engine(mut self, engine: &Engine) -> InterceptorBuilder {
        self.engine = Some(engine.clone());
        self
    }

    /// This component, compiled for the Engine given to [`InterceptorBuilder::engine`]
    /// (on another Engine the build fails). Without one, the builder runs on the Engine
    /// the component was compiled for, as if it had been given: it must have
    /// `Config::epoch_interruption(true)` (the build fails otherwise, naming it), and,
    /// an Engine of the embedder's, its instance slots are the embedder's to size (see
    /// [`InterceptorBuilder::engine`]), not counted by this crate as on its own Engine.
    pub fn component(mut self, component: Component) -> InterceptorBuilder {
        self.component = Some(Code::Compiled(component));
        self
    }

    /// The component precompiled (`Engine::precompile_component`) for an Engine
    /// configured like the builder's, loaded with `Component::deserialize` at build.
    /// Without [`InterceptorBuilder::engine`], that is an Engine the builder makes for it
    /// at each build, configured as this crate's default one (its own instance pool,
    /// ticker thread and slots, shared with no other interceptor), whose settings differ
    /// where its instance pool could not be set up (see the README's Backpressure): bytes
    /// for the one do not load on the other (the build fails).
    ///
    /// # Safety
    ///
    /// As for `Component::deserialize`: `bytes` must come from
    /// `Engine::precompile_component` (or `Component::serialize`) of this same wasmtime
    /// version, and must not have been altered since: wasmtime checks the Engine's
    /// settings and (with its default `ModuleVersionStrategy`) its own version, but runs
    /// the machine code in them as is. Bytes precompiled on an Engine of your own load
    /// only with that Engine given to [`InterceptorBuilder::engine`]: this crate's default
    /// is configured otherwise (component-model concurrency off, among others).
    pub unsafe fn precompiled(mut self, bytes: Vec<u8>) -> InterceptorBuilder {
        self.component = Some(Code::Precompiled(bytes));
        self
    }

    /// Host configuration; its `component` is used only when none was given here.
    pub fn options(mut self, options: Options) -> InterceptorBuilder {
        self.options = options;
        self
    }

    /// Who advances the Engine's epoch (default: a shared ticker thread per Engine).
    pub fn epochs(mut self, epochs: Epochs) -> InterceptorBuilder {
        self.epochs = epochs;
        self
    }

    /// The linked component and the options, for `build` (in `api`, the layer above,
    /// so that this module does not depend on it).
    pub(crate) fn into_parts(self) -> Result<(Arc<Runtime>, Options), Error> {
        let runtime = self.runtime().map_err(Error::setup)?;
        Ok((runtime, self.options))
    }

    fn runtime(&self) -> wasmtime::Result<Arc<Runtime>> {
        let default = self.engine.is_none() && self.component.is_none();
        if default && self.options.component.is_none() && self.epochs == Epochs::Ticker {
            return Runtime::embedded();
        }
        let embedders = self.embedders_engine();
        let engine = match &embedders {
            Some(engine) => engine.clone(),
            // Nobody else holds this Engine, so nobody could advance its epoch: the
            // component's CPU would be unbounded.
            None if self.epochs == Epochs::External => wasmtime::bail!(
                "`Epochs::External` needs the embedder's own Engine (`InterceptorBuilder::engine`, \
                 or a `Component` compiled for it), whose epoch it advances"
            ),
            None => default_engine()?,
        };
        check_engine(&engine)?;
        let component = match &self.component {
            Some(Code::Compiled(component)) => component.clone(),
            // SAFETY: the caller of `precompiled` vouched for these bytes.
            Some(Code::Precompiled(bytes)) => unsafe {
                Component::deserialize(&engine, bytes).map_err(|e| {
                    e.context(
                        "load the precompiled component: it must have been compiled for an \
                         Engine configured as this one (precompiled on an Engine of yours? \
                         give that Engine to `InterceptorBuilder::engine`)",
                    )
                })?
            },
            None => compile(
                &engine,
                self.options
                    .component
                    .as_deref()
                    .unwrap_or(EMBEDDED_COMPONENT),
            )?,
        };
        let runtime = Runtime::with_component(&engine, &component, self.epochs)?;
        Ok(Arc::new(match embedders {
            Some(_) => runtime,
            None => runtime.on_default_engine(),
        }))
    }

    /// The embedder's Engine: the one given, else the one the given `Component` was
    /// compiled for (on another, it could not be instantiated).
    fn embedders_engine(&self) -> Option<Engine> {
        match (&self.engine, &self.component) {
            (Some(engine), _) => Some(engine.clone()),
            (None, Some(Code::Compiled(component))) => Some(component.engine().clone()),
            (None, _) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes precompiled on an Engine of the embedder's load only with that Engine given:
    /// without it they are refused (the crate's default Engine is configured otherwise),
    /// the error naming the remedy.
    #[test]
    fn bytes_precompiled_for_another_engine_need_that_engine() {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).unwrap();
        let bytes = engine.precompile_component(EMBEDDED_COMPONENT).unwrap();
        // SAFETY: the bytes were just made by `precompile_component` of this wasmtime.
        let alone = unsafe { InterceptorBuilder::new().precompiled(bytes.clone()) };
        let error = alone.into_parts().err().expect("refused").to_string();
        assert!(error.contains("InterceptorBuilder::engine"), "{error}");
        // SAFETY: as above.
        let with_it = unsafe { InterceptorBuilder::new().engine(&engine).precompiled(bytes) };
        assert!(with_it.into_parts().is_ok());
    }

    /// A default Engine is the builder's own: nobody could advance its epoch.
    #[test]
    fn external_epochs_need_the_embedders_engine() {
        let error = InterceptorBuilder::new()
            .epochs(Epochs::External)
            .into_parts()
            .err()
            .expect("refused")
            .to_string();
        assert!(error.contains("InterceptorBuilder::engine"), "{error}");
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).unwrap();
        let built = InterceptorBuilder::new()
            .engine(&engine)
            .epochs(Epochs::External)
            .into_parts();
        assert!(built.is_ok());
    }
}
