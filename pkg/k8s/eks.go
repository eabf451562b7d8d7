package k8s

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"k8s.io/client-go/rest"
)

const (
	// eksTokenPrefix and the header below are what the EKS authenticator
	// expects: the token is a presigned STS GetCallerIdentity URL whose
	// signature also covers the cluster it is meant for.
	eksTokenPrefix    = "k8s-aws-v1."
	eksClusterHeader  = "x-k8s-aws-id"
	eksPresignExpires = "60"
	// EKS accepts a token for 15 minutes after signing; it is replaced one
	// minute early so a request in flight never carries an expired one.
	eksTokenRefresh = 14 * time.Minute
)

// ClusterDescriber is the EKS call FromEKS makes; *eks.Client satisfies it.
type ClusterDescriber interface {
	DescribeCluster(ctx context.Context, in *eks.DescribeClusterInput,
		optFns ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// STSPresigner presigns the STS call an EKS token is made of;
// *sts.PresignClient satisfies it.
type STSPresigner interface {
	PresignGetCallerIdentity(ctx context.Context, in *sts.GetCallerIdentityInput,
		optFns ...func(*sts.PresignOptions)) (*v4.PresignedHTTPRequest, error)
}

// FromEKSConfig is FromEKS with the EKS and STS clients made from cfg (its
// region and credentials) and the wall clock.
func FromEKSConfig(ctx context.Context, cfg aws.Config, clusterName string) (*rest.Config, error) {
	return FromEKS(ctx, eks.NewFromConfig(cfg), sts.NewPresignClient(sts.NewFromConfig(cfg)), clusterName, time.Now)
}

// FromEKS builds a client configuration for the EKS cluster clusterName: its
// endpoint and CA come from DescribeCluster, and every request carries an IAM
// bearer token made with presigner. Tokens are cached and replaced after 14
// minutes (per clock, nil meaning time.Now), so a long-running process keeps
// working past the tokens' 15-minute life. The first token is made here, so
// missing or unusable credentials fail now rather than on the first request.
// The token is added by the returned config's WrapTransport: chain further
// wrappers with (*rest.Config).Wrap rather than replacing it.
func FromEKS(ctx context.Context, eksAPI ClusterDescriber, presigner STSPresigner, clusterName string, clock func() time.Time) (*rest.Config, error) {
	if clusterName == "" {
		return nil, errors.New("eks: no cluster name given")
	}
	if clock == nil {
		clock = time.Now
	}
	out, err := eksAPI.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: &clusterName})
	if err != nil {
		var nf *ekstypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("eks cluster %s: not found (check the name and region): %w", clusterName, err)
		}
		return nil, fmt.Errorf("eks cluster %s: describe cluster: %w", clusterName, err)
	}
	c := out.Cluster
	if c == nil || aws.ToString(c.Endpoint) == "" {
		status := ekstypes.ClusterStatus("unknown")
		if c != nil {
			status = c.Status
		}
		return nil, fmt.Errorf("eks cluster %s: no API endpoint yet (status %s)", clusterName, status)
	}
	if c.CertificateAuthority == nil || aws.ToString(c.CertificateAuthority.Data) == "" {
		return nil, fmt.Errorf("eks cluster %s: no certificate authority data", clusterName)
	}
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(c.CertificateAuthority.Data))
	if err != nil {
		return nil, fmt.Errorf("eks cluster %s: decode certificate authority data: %w", clusterName, err)
	}

	// Local clusters on Outposts are identified to the authenticator by
	// their cluster ID, every other cluster by its name.
	clusterID := clusterName
	if c.OutpostConfig != nil && aws.ToString(c.Id) != "" {
		clusterID = aws.ToString(c.Id)
	}
	tokens := &eksTokenSource{presigner: presigner, clusterID: clusterID, clock: clock}
	if _, err := tokens.token(ctx); err != nil {
		return nil, fmt.Errorf("eks cluster %s: %w", clusterName, err)
	}
	return &rest.Config{
		Host:            aws.ToString(c.Endpoint),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return &bearerRoundTripper{tokens: tokens, next: rt}
		},
	}, nil
}

// eksTokenSource makes EKS bearer tokens and caches the current one; it is
// shared by every transport built from one rest.Config.
type eksTokenSource struct {
	presigner STSPresigner
	clusterID string
	clock     func() time.Time

	mu       sync.Mutex
	current  string
	issuedAt time.Time
}

// token returns the cached token while it is younger than eksTokenRefresh,
// else a new one.
func (s *eksTokenSource) token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	if s.current != "" && now.Sub(s.issuedAt) < eksTokenRefresh && !now.Before(s.issuedAt) {
		return s.current, nil
	}
	tok, err := presignEKSToken(ctx, s.presigner, s.clusterID)
	if err != nil {
		return "", err
	}
	s.current, s.issuedAt = tok, now
	return tok, nil
}

// invalidate drops the cached token if it is still tok, so that a token the
// API server rejected is not sent again.
func (s *eksTokenSource) invalidate(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == tok {
		s.current = ""
	}
}

// presignEKSToken presigns STS GetCallerIdentity with the cluster header
// signed and a 60-second URL expiry, and encodes the URL as an EKS token.
func presignEKSToken(ctx context.Context, presigner STSPresigner, clusterID string) (string, error) {
	addClusterHeader := func(stack *middleware.Stack) error {
		// Build runs after the request is turned into a GET and before it is
		// signed, so both the header and the query parameter are covered by
		// the signature.
		return stack.Build.Add(middleware.BuildMiddlewareFunc("nodetideEKSToken",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				req, ok := in.Request.(*smithyhttp.Request)
				if !ok {
					return middleware.BuildOutput{}, middleware.Metadata{}, fmt.Errorf("unexpected request type %T", in.Request)
				}
				req.Header.Set(eksClusterHeader, clusterID)
				q := req.URL.Query()
				q.Set("X-Amz-Expires", eksPresignExpires)
				req.URL.RawQuery = q.Encode()
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	}
	signed, err := presigner.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{},
		func(o *sts.PresignOptions) {
			o.ClientOptions = append(o.ClientOptions, func(o *sts.Options) {
				o.APIOptions = append(o.APIOptions, addClusterHeader)
			})
		})
	if err != nil {
		return "", fmt.Errorf("presign sts GetCallerIdentity for the eks token: %w", err)
	}
	return eksTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(signed.URL)), nil
}

// bearerRoundTripper puts the current EKS token on every request.
type bearerRoundTripper struct {
	tokens *eksTokenSource
	next   http.RoundTripper
}

func (rt *bearerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := rt.tokens.token(req.Context())
	if err != nil {
		return nil, fmt.Errorf("eks token for %s %s: %w", req.Method, req.URL.Path, err)
	}
	// A RoundTripper must not modify the caller's request.
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := rt.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		// A token refused before its 15 minutes (clock skew, revoked
		// credentials) is replaced on the next request instead of being reused.
		rt.tokens.invalidate(tok)
	}
	return resp, err
}

// WrappedRoundTripper lets client-go's transport utilities see through this
// wrapper.
func (rt *bearerRoundTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }
