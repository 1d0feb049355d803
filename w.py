exec(open('/tmp/audit-a-run/probe.py').read())
import collections
pids = collections.Counter()
for i in range(30):
    cl = KrypkasinoClient("127.0.0.1:51654", options=[("grpc.use_local_subchannel_pool",1)])
    g = cl.new_game(players=2)
    # open on another connection
    cl2 = KrypkasinoClient("127.0.0.1:51654", options=[("grpc.use_local_subchannel_pool",1)])
    cl2.score(state=g.state)
    cl.close(); cl2.close()
print("ok")
