//! The PD service: members (one, the leader), the timestamp oracle stream, stores (one),
//! regions, and the GC safe points ([`crate::safe_points`]). Region keys cross this service
//! memcomparable-encoded.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::cluster::{decode_key, encode_key, unix_now, Cluster, Region, STORE_ID};
use crate::mvcc::LOGICAL_BITS;
use crate::proto::{metapb, pdpb};

pub struct Pd {
    pub cluster: Arc<Cluster>,
}

impl Pd {
    fn header(&self) -> Option<pdpb::ResponseHeader> {
        Some(pdpb::ResponseHeader {
            cluster_id: self.cluster.id,
            error: None,
        })
    }

    fn error_header(&self, kind: pdpb::ErrorType, message: String) -> Option<pdpb::ResponseHeader> {
        Some(pdpb::ResponseHeader {
            cluster_id: self.cluster.id,
            error: Some(pdpb::Error {
                r#type: kind as i32,
                message,
            }),
        })
    }

    fn member(&self) -> pdpb::Member {
        let url = format!("http://{}", self.cluster.pd_addr);
        pdpb::Member {
            name: "saker-tikv-sim".into(),
            member_id: 1,
            peer_urls: vec![url.clone()],
            client_urls: vec![url],
            ..Default::default()
        }
    }

    fn store(&self) -> metapb::Store {
        metapb::Store {
            id: STORE_ID,
            address: self.cluster.store_addr.clone(),
            state: metapb::StoreState::Up as i32,
            version: "8.5.0".into(),
            ..Default::default()
        }
    }

    fn region_reply(&self, region: Option<Region>) -> pdpb::GetRegionResponse {
        let Some(r) = region else {
            return pdpb::GetRegionResponse {
                header: self.error_header(pdpb::ErrorType::RegionNotFound, "no such region".into()),
                ..Default::default()
            };
        };
        let (region, leader) = meta_region(&r);
        pdpb::GetRegionResponse {
            header: self.header(),
            region: Some(region),
            leader: Some(leader),
            ..Default::default()
        }
    }
}

/// A region as kvproto describes it (encoded keys), and its only peer (the leader).
pub fn meta_region(r: &Region) -> (metapb::Region, metapb::Peer) {
    let peer = metapb::Peer {
        id: r.peer_id(),
        store_id: STORE_ID,
        ..Default::default()
    };
    let region = metapb::Region {
        id: r.id,
        start_key: encode_key(&r.start),
        end_key: encode_key(&r.end),
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: 1,
            version: r.version,
        }),
        peers: vec![peer],
        ..Default::default()
    };
    (region, peer)
}

type TsoStream = Pin<Box<dyn Stream<Item = Result<pdpb::TsoResponse, Status>> + Send>>;

#[tonic::async_trait]
impl pdpb::pd_server::Pd for Pd {
    async fn get_members(
        &self,
        _: Request<pdpb::GetMembersRequest>,
    ) -> Result<Response<pdpb::GetMembersResponse>, Status> {
        let me = self.member();
        Ok(Response::new(pdpb::GetMembersResponse {
            header: self.header(),
            members: vec![me.clone()],
            leader: Some(me.clone()),
            etcd_leader: Some(me),
            ..Default::default()
        }))
    }

    async fn tso(
        &self,
        request: Request<Streaming<pdpb::TsoRequest>>,
    ) -> Result<Response<TsoStream>, Status> {
        let cluster = self.cluster.clone();
        let header = self.header();
        let stream = request.into_inner().map(move |req| {
            let req = req?;
            let last = cluster.timestamps(req.count);
            Ok(pdpb::TsoResponse {
                header: header.clone(),
                count: req.count,
                timestamp: Some(pdpb::Timestamp {
                    physical: (last >> LOGICAL_BITS) as i64,
                    logical: (last & ((1 << LOGICAL_BITS) - 1)) as i64,
                    suffix_bits: 0,
                }),
            })
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_store(
        &self,
        request: Request<pdpb::GetStoreRequest>,
    ) -> Result<Response<pdpb::GetStoreResponse>, Status> {
        if request.get_ref().store_id != STORE_ID {
            return Ok(Response::new(pdpb::GetStoreResponse {
                header: self.error_header(pdpb::ErrorType::Unknown, "no such store".into()),
                ..Default::default()
            }));
        }
        Ok(Response::new(pdpb::GetStoreResponse {
            header: self.header(),
            store: Some(self.store()),
            ..Default::default()
        }))
    }

    async fn get_all_stores(
        &self,
        _: Request<pdpb::GetAllStoresRequest>,
    ) -> Result<Response<pdpb::GetAllStoresResponse>, Status> {
        Ok(Response::new(pdpb::GetAllStoresResponse {
            header: self.header(),
            stores: vec![self.store()],
        }))
    }

    async fn get_region(
        &self,
        request: Request<pdpb::GetRegionRequest>,
    ) -> Result<Response<pdpb::GetRegionResponse>, Status> {
        let enc = &request.get_ref().region_key;
        let Some(key) = decode_key(enc) else {
            return Err(Status::invalid_argument(
                "region key is not memcomparable-encoded",
            ));
        };
        Ok(Response::new(
            self.region_reply(Some(self.cluster.region_of(&key))),
        ))
    }

    async fn get_region_by_id(
        &self,
        request: Request<pdpb::GetRegionByIdRequest>,
    ) -> Result<Response<pdpb::GetRegionResponse>, Status> {
        let region = self.cluster.region_by_id(request.get_ref().region_id);
        Ok(Response::new(self.region_reply(region)))
    }

    async fn scan_regions(
        &self,
        request: Request<pdpb::ScanRegionsRequest>,
    ) -> Result<Response<pdpb::ScanRegionsResponse>, Status> {
        let req = request.into_inner();
        let start = decode_key(&req.start_key)
            .ok_or_else(|| Status::invalid_argument("start key is not encoded"))?;
        let end = decode_key(&req.end_key)
            .ok_or_else(|| Status::invalid_argument("end key is not encoded"))?;
        let limit = if req.limit <= 0 {
            usize::MAX
        } else {
            req.limit as usize
        };
        let regions = self
            .cluster
            .regions()
            .into_iter()
            .filter(|r| r.end.is_empty() || r.end > start)
            .filter(|r| end.is_empty() || r.start < end)
            .take(limit)
            .map(|r| {
                let (region, leader) = meta_region(&r);
                pdpb::Region {
                    region: Some(region),
                    leader: Some(leader),
                    ..Default::default()
                }
            })
            .collect();
        Ok(Response::new(pdpb::ScanRegionsResponse {
            header: self.header(),
            regions,
            ..Default::default()
        }))
    }

    async fn get_gc_safe_point(
        &self,
        _: Request<pdpb::GetGcSafePointRequest>,
    ) -> Result<Response<pdpb::GetGcSafePointResponse>, Status> {
        Ok(Response::new(pdpb::GetGcSafePointResponse {
            header: self.header(),
            safe_point: self.cluster.safe_points.lock().gc(),
        }))
    }

    async fn update_gc_safe_point(
        &self,
        request: Request<pdpb::UpdateGcSafePointRequest>,
    ) -> Result<Response<pdpb::UpdateGcSafePointResponse>, Status> {
        let safe_point = request.get_ref().safe_point;
        tracing::info!(safe_point, "GC safe point moved by a client");
        Ok(Response::new(pdpb::UpdateGcSafePointResponse {
            header: self.header(),
            new_safe_point: self.cluster.safe_points.lock().update_gc(safe_point),
        }))
    }

    async fn update_service_gc_safe_point(
        &self,
        request: Request<pdpb::UpdateServiceGcSafePointRequest>,
    ) -> Result<Response<pdpb::UpdateServiceGcSafePointResponse>, Status> {
        let req = request.into_inner();
        let id = String::from_utf8_lossy(&req.service_id).into_owned();
        let now = unix_now();
        let done =
            self.cluster
                .safe_points
                .lock()
                .update_service(&id, req.ttl, req.safe_point, now);
        Ok(Response::new(match done {
            Ok(least) => pdpb::UpdateServiceGcSafePointResponse {
                header: self.header(),
                service_id: least.id.into_bytes(),
                ttl: least.expires_at.saturating_sub(now),
                min_safe_point: least.safe_point,
            },
            Err(e) => pdpb::UpdateServiceGcSafePointResponse {
                header: self.error_header(pdpb::ErrorType::Unknown, e),
                ..Default::default()
            },
        }))
    }
}
