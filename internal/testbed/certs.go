package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// serviceCIDR is the cluster's service range; its first address is the
	// "kubernetes" Service's ClusterIP and so must be in the serving cert.
	serviceCIDR     = "10.0.0.0/24"
	firstServiceIP  = "10.0.0.1"
	serviceIssuer   = "https://kubernetes.default.svc.cluster.local"
	certValidity    = 7 * 24 * time.Hour
	clockSkewMargin = time.Hour
)

// pki is what the bed's components authenticate with, as files in the bed's
// directory.
type pki struct {
	caCert             string // CA certificate (PEM)
	servingCert        string // apiserver serving certificate and key
	servingKey         string
	saKey              string // service-account signing key (private)
	saPub              string // and its public half
	tokenFile          string // --token-auth-file
	adminToken         string
	controllerMgrToken string
	schedulerToken     string
	caPEM              []byte
}

// writePKI generates a CA, the apiserver's serving certificate, the
// service-account key pair and static tokens for the admin and the
// components, and writes them under dir.
func writePKI(dir string) (*pki, error) {
	p := &pki{
		caCert:      filepath.Join(dir, "ca.crt"),
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		saKey:       filepath.Join(dir, "sa.key"),
		saPub:       filepath.Join(dir, "sa.pub"),
		tokenFile:   filepath.Join(dir, "tokens.csv"),
	}
	now := time.Now()
	caKey, ca, err := newCA(now)
	if err != nil {
		return nil, err
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	servingKey, servingDER, err := newServingCert(now, ca, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := newKey()
	if err != nil {
		return nil, err
	}
	if err := p.newTokens(); err != nil {
		return nil, err
	}
	if err := p.write(servingDER, servingKey, saKey); err != nil {
		return nil, err
	}
	return p, nil
}

// newCA makes the bed's self-signed CA.
func newCA(now time.Time) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	caKey, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nodetide-testbed-ca"},
		NotBefore:             now.Add(-clockSkewMargin),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, fmt.Errorf("parse the CA certificate: %w", err)
	}
	return caKey, ca, nil
}

// newServingCert makes the apiserver's serving key and certificate (DER),
// signed by the CA, for the names and addresses clients reach it by.
func newServingCert(now time.Time, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte, error) {
	servingKey, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	servingTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-clockSkewMargin),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(firstServiceIP)},
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTmpl, ca, &servingKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create the apiserver serving certificate: %w", err)
	}
	return servingKey, servingDER, nil
}

// newTokens generates the static tokens of the admin and the components.
func (p *pki) newTokens() error {
	for _, tok := range []*string{&p.adminToken, &p.controllerMgrToken, &p.schedulerToken} {
		var err error
		if *tok, err = newToken(); err != nil {
			return err
		}
	}
	return nil
}

// write writes the CA, the serving certificate and key, the
// service-account key pair and the token file to their paths in p.
func (p *pki) write(servingDER []byte, servingKey, saKey *ecdsa.PrivateKey) error {
	// The components run as members of system:masters: the bed tests
	// nodetide, not the control plane's own RBAC, and this spares the
	// controller-manager a token request per controller at start-up.
	tokens := strings.Join([]string{
		p.adminToken + `,admin,admin,"system:masters"`,
		p.controllerMgrToken + `,system:kube-controller-manager,system:kube-controller-manager,"system:masters"`,
		p.schedulerToken + `,system:kube-scheduler,system:kube-scheduler,"system:masters"`,
	}, "\n") + "\n"

	servingKeyPEM, err := keyPEM(servingKey)
	if err != nil {
		return err
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return fmt.Errorf("encode the service-account public key: %w", err)
	}
	files := []struct {
		path string
		data []byte
	}{
		{p.caCert, p.caPEM},
		{p.servingCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER})},
		{p.servingKey, servingKeyPEM},
		{p.saKey, saKeyPEM},
		{p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER})},
		{p.tokenFile, []byte(tokens)},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Base(f.path), err)
		}
	}
	return nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate an ECDSA key: %w", err)
	}
	return k, nil
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encode an ECDSA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeKubeconfig writes a kubeconfig for server authenticating with token.
func writeKubeconfig(path, server string, caPEM []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testbed"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testbed"] = &clientcmdapi.Context{Cluster: "testbed", AuthInfo: user}
	cfg.CurrentContext = "testbed"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig for %s: %w", user, err)
	}
	return nil
}
