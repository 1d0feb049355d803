import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
ch = grpc.insecure_channel("127.0.0.1:51656")
h = health_pb2_grpc.HealthStub(ch)
for n in ["", "liveness", "readiness", "cardrules.krypkasino.v1.KrypkasinoService"]:
    try: print(repr(n), health_pb2.HealthCheckResponse.ServingStatus.Name(h.Check(health_pb2.HealthCheckRequest(service=n), timeout=2).status))
    except grpc.RpcError as e: print(repr(n), e.code())
