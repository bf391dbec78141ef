package ibv

import (
	"context"
	"net/netip"

	"github.com/verbsrt/verbsrt/verbs"
)

// The provider's connection manager is rdma_cm, through ListenCM and
// DialCM; these adapters give it the provider-neutral shape of
// verbs.ConnManager.

// ListenRC is ListenCM as a verbs.RCListener.
func (*Provider) ListenRC(addr string) (verbs.RCListener, error) {
	l, err := ListenCM(addr)
	if err != nil {
		return nil, err
	}
	return rcListener{l}, nil
}

// DialRC is DialCM, from any local address, as a verbs.RCConn.
func (*Provider) DialRC(ctx context.Context, remote string) (verbs.RCConn, error) {
	c, err := DialCM(ctx, "", remote)
	if err != nil {
		return nil, err
	}
	return rcConn{c}, nil
}

type rcListener struct{ *CMListener }

func (l rcListener) Accept(ctx context.Context) (verbs.RCConn, error) {
	c, err := l.GetRequest(ctx)
	if err != nil {
		return nil, err
	}
	return rcConn{c}, nil
}

type rcConn struct{ *CMConn }

func (c rcConn) LocalAddr() netip.AddrPort  { return c.CMConn.LocalAddr() }
func (c rcConn) RemoteAddr() netip.AddrPort { return c.CMConn.RemoteAddr() }
func (c rcConn) PeerData() []byte           { return c.PeerParam().PrivateData }

// param is the rdma_conn_param of spec: the connection manager negotiates
// the retry counts and the outstanding reads and atomics each way, the
// responder resources being what this side takes (MaxDestRdAtomic) and
// the initiator depth what it issues (MaxRdAtomic).
func param(qp verbs.QP, spec verbs.ConnectSpec, private []byte) ConnParam {
	s := spec.WithDefaults(qp.Type())
	return ConnParam{PrivateData: private, ResponderResources: s.MaxDestRdAtomic, InitiatorDepth: s.MaxRdAtomic,
		RetryCount: s.RetryCnt, RNRRetryCount: s.RNRRetry}
}

func (c rcConn) Accept(ctx context.Context, qp verbs.QP, spec verbs.ConnectSpec, private []byte) error {
	return c.CMConn.Accept(ctx, qp, param(qp, spec, private))
}

func (c rcConn) Connect(ctx context.Context, qp verbs.QP, spec verbs.ConnectSpec, private []byte) error {
	return c.CMConn.Connect(ctx, qp, param(qp, spec, private))
}

var _ verbs.ConnManager = (*Provider)(nil)
