//! `RequestMirror` filters as the agent's mirror profiles
//! (`haptic_sdk::agent::MirrorEngine`, docs/spoa.md): each mirror's
//! backendRef resolved like a backendRef (kind, ReferenceGrant, port), its
//! copies sent to the Service's cluster IP, so kube-proxy balances them over
//! the ready endpoints and an endpoint flip changes nothing here.

use haptic_sdk::agent::{Fraction, Mirror, MirrorTarget};

use crate::api::HttpFilter;
use crate::conditions::Condition;
use crate::routes::{Cluster, ServiceRef, resolve_service};

/// A rule's mirrors; a mirror whose backendRef does not resolve is left
/// out, its reason the route's ResolvedRefs condition (the first problem
/// wins, as for backendRefs); one to a headless Service too, with a
/// warning's text in `left_out`.
pub fn resolve(
    route_kind: &str,
    route_namespace: &str,
    filters: &[HttpFilter],
    cluster: &Cluster<'_>,
    problem: &mut Option<Condition>,
    left_out: &mut Vec<String>,
) -> Option<Mirror> {
    let mut targets = Vec::new();
    for mirror in filters.iter().filter_map(|f| f.request_mirror.as_ref()) {
        let r = &mirror.backend_ref;
        let service = ServiceRef::from(r);
        let (namespace, port) =
            match resolve_service(route_kind, route_namespace, &service, cluster) {
                Ok(found) => found,
                Err(condition) => {
                    problem.get_or_insert(condition);
                    continue;
                }
            };
        let Some(authority) = cluster.cluster_ip_authority(namespace, &r.name, port) else {
            left_out.push(format!(
                "the RequestMirror to Service {namespace}/{} is not served: copies go to a Service's cluster IP, and it has none (headless)",
                r.name
            ));
            continue;
        };
        let mut target = MirrorTarget::new(format!("http://{authority}"));
        // The copy is the request: its own Host, not the Service's.
        target.host = Some("$host".to_owned());
        target.fraction = fraction(mirror.percent, mirror.fraction.as_ref());
        targets.push(target);
    }
    (!targets.is_empty()).then_some(Mirror { targets })
}

/// `percent` N is N in 100; `fraction` is its numerator in its denominator
/// (default 100); neither is every request. Out-of-range values (the CRD
/// refuses them) are clamped.
fn fraction(percent: Option<i32>, fraction: Option<&crate::api::MirrorFraction>) -> Fraction {
    let clamp = |n: i32| u32::try_from(n.max(0)).unwrap_or(0);
    match (fraction, percent) {
        (Some(f), _) => {
            let denominator = clamp(f.denominator.unwrap_or(100)).max(1);
            Fraction {
                numerator: clamp(f.numerator).min(denominator),
                denominator,
            }
        }
        (None, Some(p)) => Fraction {
            numerator: clamp(p).min(100),
            denominator: 100,
        },
        (None, None) => Fraction {
            numerator: 1,
            denominator: 1,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_and_fraction_become_shares() {
        let f = |n, d| crate::api::MirrorFraction {
            numerator: n,
            denominator: d,
        };
        assert_eq!(
            fraction(Some(20), None),
            Fraction {
                numerator: 20,
                denominator: 100
            }
        );
        assert_eq!(
            fraction(None, Some(&f(1, Some(3)))),
            Fraction {
                numerator: 1,
                denominator: 3
            }
        );
        assert_eq!(
            fraction(None, Some(&f(5, None))),
            Fraction {
                numerator: 5,
                denominator: 100
            }
        );
        assert_eq!(
            fraction(None, None),
            Fraction {
                numerator: 1,
                denominator: 1
            }
        );
        assert_eq!(crate::agent_profile("ns/route/0"), "gateway-api.ns.route.0");
    }
}
