//! `ingress`: being written; renders nothing yet.

use haptic_sdk::{Context, Info, Library, Output, Result};

/// The `ingress` library.
#[derive(Debug, Default)]
pub struct Ingress;

impl Library for Ingress {
    fn info(&self) -> Info {
        Info::new("ingress", env!("CARGO_PKG_VERSION")).order(200)
    }

    fn render(&mut self, _ctx: &Context<'_>, _out: &mut Output) -> Result<()> {
        Ok(())
    }
}

haptic_sdk::export_library!(Ingress);
