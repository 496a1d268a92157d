//! A hostile component for the host's tests: it implements `ahp:interceptor` but never
//! settles. A registration containing "panic" makes `intercept` panic (a trap), except for
//! an event containing "spin"; anything else makes it spin forever. A registration
//! containing "spin-on-load" makes `load` itself spin, before any call. The host must
//! turn each into an `engine-failure` denial (or, in `load`, a setup error) within its
//! bound.

#[cfg(target_family = "wasm")]
mod component {
    wit_bindgen::generate!({ path: "../../wit", world: "plugin" });

    use exports::ahp::interceptor::interceptor::{
        BackendPlan, Delivery, EffectKind, EventCapability, Guest, GuestEngine, Problem, Settlement,
    };

    struct Component;
    export!(Component);

    impl Guest for Component {
        type Engine = Runaway;
    }

    struct Runaway {
        panics: bool,
    }

    impl GuestEngine for Runaway {
        fn interceptable() -> Vec<EventCapability> {
            Vec::new()
        }

        fn load(
            registration: String,
            _declaration: Vec<EventCapability>,
        ) -> Result<exports::ahp::interceptor::interceptor::Engine, Vec<Problem>> {
            if registration.contains("spin-on-load") {
                spin()
            }
            let panics = registration.contains("panic");
            Ok(exports::ahp::interceptor::interceptor::Engine::new(
                Runaway { panics },
            ))
        }

        fn warnings(&self) -> Vec<Problem> {
            Vec::new()
        }

        fn plan(&self) -> Vec<BackendPlan> {
            Vec::new()
        }

        fn bound_ms(&self) -> u64 {
            100
        }

        fn first_timeouts(&self) -> Vec<(String, u64)> {
            Vec::new()
        }

        fn intercept(
            &self,
            event: String,
            _effects: Vec<EffectKind>,
            _budget: Option<u64>,
            _started: u64,
        ) -> Result<Settlement, Vec<Problem>> {
            if self.panics && !event.contains("spin") {
                panic!("the component failed");
            }
            spin()
        }

        fn observe(
            &self,
            _event: String,
            _budget: Option<u64>,
            _started: u64,
        ) -> Result<Vec<Delivery>, Vec<Problem>> {
            spin()
        }
    }

    fn spin() -> ! {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}
