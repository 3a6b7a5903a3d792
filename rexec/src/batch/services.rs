//! Finding the batch queue without a `[batch]` address: the queues a selector
//! knows of, from its `Services` answer (the selectors found as for a run:
//! `[selectors]`, else those heard on the `[discovery]` group). With a
//! configured `server_name`, only the queue of that name; else any queue, the
//! one heard from most recently first.

use clients::selector::Services;
use proto::select::{ServiceKind, ServiceView};
use tokio_rustls::TlsConnector;

use crate::config::Config;
use crate::exit::Error;
use crate::select::ASK_TIMEOUT;

/// The address and certificate name of the queue a selector knows of, if
/// any; `None` without selectors to ask.
pub async fn find_queue(
    config: &Config,
    connector: &TlsConnector,
) -> Result<Option<(String, String)>, Error> {
    if config.selectors.is_empty() && config.discovery.is_none() {
        return Ok(None);
    }
    let mut selectors = crate::find::selectors(config, connector, &|_| {})
        .await
        .map_err(|e| Error::Failed(e.to_string()))?;
    let (_, services) = selectors.ask(connector, &Services, ASK_TIMEOUT).await?;
    Ok(pick(&services, config.batch.server_name.as_deref()))
}

/// The queue to use among `services`, by the rule in the module docs.
///
/// ```
/// use proto::select::{ServiceKind, ServiceView};
/// let s = |kind, name: &str, age_ms| ServiceView {
///     kind, name: name.into(), addr: "127.0.0.1:7490".parse().unwrap(), age_ms,
/// };
/// let all = [s(ServiceKind::Account, "accountd", 0), s(ServiceKind::Batch, "batchd-2", 900),
///            s(ServiceKind::Batch, "batchd-1", 100)];
/// let pick = rexec::batch::services::pick;
/// assert_eq!(pick(&all, None).unwrap().1, "batchd-1");
/// assert_eq!(pick(&all, Some("batchd-2")).unwrap().1, "batchd-2");
/// assert_eq!(pick(&all, Some("accountd")), None);
/// ```
pub fn pick(services: &[ServiceView], name: Option<&str>) -> Option<(String, String)> {
    services
        .iter()
        .filter(|s| s.kind == ServiceKind::Batch)
        .filter(|s| name.is_none_or(|n| s.name == n))
        .filter(|s| certs::check_name(certs::Role::Service, &s.name).is_ok())
        .min_by_key(|s| s.age_ms)
        .map(|s| (s.addr.to_string(), s.name.clone()))
}
