//! Preparing a pod's containers: volumes, environment, command line, mounts
//! and probes, with kubelet's waiting reasons when something is missing.

use std::collections::HashMap;
use std::path::PathBuf;

use super::super::Program;
use super::super::container::{Launch, Mount};
use super::super::env::{self, Addresses};
use super::super::{probe, volumes};
use super::{Worker, waiting};

impl Worker {
    /// Volumes, environments, commands and probes for every container; on
    /// failure the containers wait with kubelet's reason and message.
    pub(super) async fn set_up(&mut self) -> Result<(), ()> {
        let sidecar = self
            .slots
            .iter()
            .any(|s| s.init && s.spec.restart_policy.as_deref() == Some("Always"));
        if sidecar {
            // Run as a plain init container it would never complete: say so instead.
            let message = "sidecar init containers (restartPolicy: Always) are not supported by the test bed's kubelet";
            for s in &mut self.slots {
                s.view.state = waiting("CreateContainerConfigError", message.to_string());
            }
            return Err(());
        }
        let addrs = Addresses {
            pod_ip: self.ip,
            host_ip: self.shared.node_ip,
        };
        let volume_root = self.dir.join("volumes");
        let volumes =
            match volumes::prepare(&self.shared.client, &self.pod, &volume_root, addrs).await {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(pod = %self.name(), "{e}");
                    for s in &mut self.slots {
                        s.view.state = waiting("ContainerCreating", String::new());
                    }
                    return Err(());
                }
            };
        let mut failed = false;
        for idx in 0..self.slots.len() {
            match self.launch_for(idx, &volumes, addrs).await {
                Ok(launch) => self.slots[idx].launch = Some(launch),
                Err((reason, message)) => {
                    tracing::warn!(pod = %self.name(), container = %self.slots[idx].spec.name, "{reason}: {message}");
                    self.slots[idx].view.state = waiting(reason, message);
                    failed = true;
                }
            }
            let spec = &self.slots[idx].spec;
            match probe::readiness(spec).and_then(|r| Ok((r, probe::liveness(spec)?))) {
                Ok((readiness, liveness)) => {
                    self.slots[idx].probe = readiness;
                    self.slots[idx].liveness = liveness;
                }
                Err(message) => {
                    self.slots[idx].view.state = waiting("CreateContainerConfigError", message);
                    failed = true;
                }
            }
        }
        if failed { Err(()) } else { Ok(()) }
    }

    async fn launch_for(
        &self,
        idx: usize,
        volumes: &HashMap<String, PathBuf>,
        addrs: Addresses,
    ) -> Result<Launch, (&'static str, String)> {
        let c = &self.slots[idx].spec;
        let image = c.image.clone().unwrap_or_default();
        let program = self.shared.config.program_for(&image);
        let has_command = c.command.as_ref().is_some_and(|v| !v.is_empty());
        if program.is_none() && !has_command {
            let msg = format!(
                "image {image:?} is not in the test bed's program table (known: {})",
                self.shared.config.known_images()
            );
            return Err(("ErrImagePull", msg));
        }
        let ports: Vec<String> = c
            .ports
            .iter()
            .flatten()
            .map(|p| p.container_port.to_string())
            .collect();
        let pod_name = self.pod.metadata.name.clone().unwrap_or_default();
        let mut base = vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            ),
            ("HOME".to_string(), "/root".to_string()),
            ("HOSTNAME".to_string(), pod_name),
            ("HAPTIC_TESTBED_POD_IP".to_string(), self.ip.to_string()),
            (
                "HAPTIC_TESTBED_CONTAINER_PORTS".to_string(),
                ports.join(","),
            ),
        ];
        if let Some((host, port)) = &self.shared.config.api_server {
            base.push(("KUBERNETES_SERVICE_HOST".into(), host.clone()));
            base.push(("KUBERNETES_SERVICE_PORT".into(), port.to_string()));
            base.push(("KUBERNETES_SERVICE_PORT_HTTPS".into(), port.to_string()));
        }
        if let Some(p) = program {
            base.extend(p.env.iter().cloned());
        }
        let env = env::resolve(&self.shared.client, &self.pod, c, addrs, base)
            .await
            .map_err(|e| ("CreateContainerConfigError", e.to_string()))?;
        let expand = |v: &Vec<String>| v.iter().map(|a| env::expand(a, &env)).collect::<Vec<_>>();
        let args = c.args.as_ref().map(expand);
        let argv = match (
            c.command.as_ref().filter(|v| !v.is_empty()).map(expand),
            program,
        ) {
            (Some(mut command), p) => {
                // `command` replaces the image's entrypoint; naming the program's file
                // (e.g. `echo-server`, or `/usr/local/bin/haptic` where the image
                // installs it) runs the mapped program.
                if let Some(p) = p
                    && names_program(&command[0], p)
                {
                    command[0] = p.path.to_string_lossy().into_owned();
                }
                command.extend(args.unwrap_or_default());
                command
            }
            (None, Some(p)) => {
                let mut argv = vec![p.path.to_string_lossy().into_owned()];
                argv.extend(args.unwrap_or_else(|| p.args.clone()));
                argv
            }
            (None, None) => return Err(("CreateContainerConfigError", "no command".into())),
        };
        let mut mounts = Vec::new();
        for m in c.volume_mounts.iter().flatten() {
            let Some(source) = volumes.get(&m.name) else {
                return Err((
                    "CreateContainerConfigError",
                    format!("volume mount {:?} names no volume of the pod", m.name),
                ));
            };
            let sub = m.sub_path.as_deref().filter(|s| !s.is_empty());
            mounts.push(Mount {
                source: sub.map_or_else(|| source.clone(), |s| source.join(s)),
                target: m.mount_path.clone(),
                read_only: m.read_only.unwrap_or(false),
            });
        }
        Ok(Launch {
            argv,
            env,
            mounts,
            workdir: c.working_dir.clone().unwrap_or_else(|| "/".into()),
            log: self.dir.join("logs").join(&c.name).join("0.log"),
        })
    }
}

/// Whether a container's `command[0]` names the image's program: its file
/// name alone, or any path ending in it (the place the image installs it,
/// such as `/usr/local/bin/haptic`), as an image's entrypoint would be found.
fn names_program(command: &str, program: &Program) -> bool {
    let Some(file) = program.path.file_name() else {
        return false;
    };
    std::path::Path::new(command).file_name() == Some(file)
        && (command == file.to_string_lossy() || command.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_names_the_program_by_file_name_or_by_its_path_in_the_image() {
        let haptic = Program::new("/build/target/debug/haptic");
        assert!(names_program("haptic", &haptic));
        assert!(names_program("/usr/local/bin/haptic", &haptic));
        assert!(!names_program("/usr/local/bin/haptic-other", &haptic));
        assert!(
            !names_program("bin/haptic", &haptic),
            "a relative path is the image's, not found"
        );
        assert!(!names_program("sh", &haptic));
    }
}
