/*
 * A minimal standalone launcher for Canal's server components, written for
 * canalbridge's real-stack tests (not taken from Canal).
 *
 * Why it exists: Maven Central carries Canal's server modules (canal.server,
 * canal.parse, canal.instance.*) up to 1.1.7 but no canal.deployer (the module
 * with CanalLauncher and the Spring instance files) for 1.1.5 or later, and
 * nothing of the server side of 1.1.8. This class does what the deployer does
 * for the configurations users run: tcp or kafka mode, no admin port, file or
 * memory meta (file-instance.xml's FileMixedMetaManager, so a restart resumes
 * from meta.dat), or an HA pair behind ZooKeeper (canal.zkServers: the running
 * server of each destination elected there, default-instance.xml's
 * PeriodMixedMetaManager keeping the cursors there), a memory store, a MySQL
 * binlog parser, and the schema history (tsdb) in H2 or MySQL as Canal ships
 * it (TableHistory.java). Everything else is Canal's own code.
 *
 * It reads the deployer's files and key names: CONF_DIR/canal.properties, then
 * CONF_DIR/DESTINATION/instance.properties over it, then -Dkey=value over both,
 * with ${key} and ${key:default} resolved as the deployer's Spring placeholder
 * configurer does (canal.instance.destination is the destination's name).
 * Usage:
 *
 *   java -cp CONF_DIR:LAUNCHER_DIR:LIB_DIR/* canalbridge.devkit.CanalBridgeDevLauncher CONF_DIR
 */
package canalbridge.devkit;

import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import com.alibaba.otter.canal.common.alarm.LogAlarmHandler;
import com.alibaba.otter.canal.common.zookeeper.ZkClientx;
import com.alibaba.otter.canal.common.zookeeper.ZookeeperPathUtils;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningData;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningListener;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningMonitor;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningMonitors;
import com.alibaba.otter.canal.connector.core.spi.CanalMQProducer;
import com.alibaba.otter.canal.filter.aviater.AviaterRegexFilter;
import com.alibaba.otter.canal.instance.core.CanalInstance;
import com.alibaba.otter.canal.instance.core.CanalMQConfig;
import com.alibaba.otter.canal.instance.spring.CanalInstanceWithSpring;
import com.alibaba.otter.canal.meta.CanalMetaManager;
import com.alibaba.otter.canal.meta.FileMixedMetaManager;
import com.alibaba.otter.canal.meta.MemoryMetaManager;
import com.alibaba.otter.canal.meta.PeriodMixedMetaManager;
import com.alibaba.otter.canal.meta.ZooKeeperMetaManager;
import com.alibaba.otter.canal.parse.ha.HeartBeatHAController;
import com.alibaba.otter.canal.parse.inbound.mysql.MysqlEventParser;
import com.alibaba.otter.canal.parse.index.FailbackLogPositionManager;
import com.alibaba.otter.canal.parse.index.MemoryLogPositionManager;
import com.alibaba.otter.canal.parse.index.MetaLogPositionManager;
import com.alibaba.otter.canal.parse.support.AuthenticationInfo;
import com.alibaba.otter.canal.protocol.position.EntryPosition;
import com.alibaba.otter.canal.server.CanalMQStarter;
import com.alibaba.otter.canal.server.embedded.CanalServerWithEmbedded;
import com.alibaba.otter.canal.server.netty.CanalServerWithNetty;
import com.alibaba.otter.canal.sink.entry.EntryEventSink;
import com.alibaba.otter.canal.store.model.BatchMode;
import com.alibaba.otter.canal.store.memory.MemoryEventStoreWithBuffer;

public final class CanalBridgeDevLauncher {

    /** canal.instance.global.spring.xml values this launcher wires (the deployer's instance files). */
    private static final String FILE_INSTANCE = "classpath:spring/file-instance.xml";
    private static final String MEMORY_INSTANCE = "classpath:spring/memory-instance.xml";
    private static final String ZOOKEEPER_INSTANCE = "classpath:spring/default-instance.xml";

    private static final String KAFKA_PRODUCER = "com.alibaba.otter.canal.connector.kafka.producer.CanalKafkaProducer";

    private static final Logger LOG = LoggerFactory.getLogger(CanalBridgeDevLauncher.class);

    private final File confDir;
    private final Settings server;
    private ZkClientx zk; // with canal.zkServers: the running-server election and the cursors

    private CanalBridgeDevLauncher(File confDir) throws IOException {
        this.confDir = confDir;
        this.server = new Settings(load(new File(confDir, "canal.properties"), new Properties()), "");
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: CanalBridgeDevLauncher CONF_DIR");
            System.exit(2);
        }
        CanalBridgeDevLauncher launcher = new CanalBridgeDevLauncher(new File(args[0]));
        try {
            launcher.run();
        } catch (Throwable e) {
            LOG.error("## canalbridge dev launcher failed to start", e);
            System.exit(1);
        }
    }

    private void run() throws InterruptedException {
        requireEmpty("canal.admin.manager", "canal-admin is not supported by this launcher");
        String global = server.get("canal.instance.global.mode", "spring");
        if (!"spring".equals(global)) {
            throw new IllegalArgumentException("canal.instance.global.mode = " + global + ": only spring is supported here");
        }
        String mode = server.get("canal.serverMode", "tcp").toLowerCase();
        boolean kafka = "kafka".equals(mode);
        if (!kafka && !"tcp".equals(mode)) {
            throw new IllegalArgumentException("canal.serverMode = " + mode + ": only tcp and kafka are supported here");
        }
        String user = server.get("canal.user", "");
        String passwd = server.get("canal.passwd", "");
        if (!user.isEmpty() && passwd.isEmpty()) {
            throw new IllegalArgumentException("canal.user is set but canal.passwd is empty");
        }
        String ip = server.get("canal.ip", "");
        if (ip.isEmpty()) {
            throw new IllegalArgumentException("canal.ip is empty: it would listen on every interface");
        }
        int port = Integer.parseInt(server.get("canal.port", "11111"));
        String[] destinations = server.get("canal.destinations", "").split(",");
        String zkServers = server.get("canal.zkServers", "");
        final String node = ip + ":" + port;
        if (!zkServers.isEmpty()) {
            // As the deployer's CanalController: the roots, and this server among the cluster's (ephemeral).
            zk = ZkClientx.getZkClient(zkServers);
            zk.createPersistent(ZookeeperPathUtils.DESTINATION_ROOT_NODE, true);
            zk.createPersistent(ZookeeperPathUtils.CANAL_CLUSTER_ROOT_NODE, true);
            register(ZookeeperPathUtils.getCanalClusterNode(node));
            zk.subscribeStateChanges(new org.I0Itec.zkclient.IZkStateListener() {

                public void handleStateChanged(org.apache.zookeeper.Watcher.Event.KeeperState state) {
                }

                public void handleNewSession() { // ephemeral nodes went with the old session
                    register(ZookeeperPathUtils.getCanalClusterNode(node));
                }

                public void handleSessionEstablishmentError(Throwable error) {
                    LOG.error("## failed to connect to zookeeper", error);
                }
            });
        }
        final ZkClientx zkClient = zk;

        final CanalServerWithEmbedded embedded = CanalServerWithEmbedded.instance();
        embedded.setCanalInstanceGenerator(this::instance);
        embedded.setUser(user.isEmpty() ? null : user);
        embedded.setPasswd(passwd.isEmpty() ? null : passwd);

        // The netty handlers ask these monitors to start a destination on
        // subscribe; without ZooKeeper a monitor just starts or stops it, with it
        // the monitor runs the destination only while this server holds its
        // running node (the others wait, standby).
        ServerRunningData runningData = new ServerRunningData(ip + ":" + port);
        ServerRunningMonitors.setServerData(runningData);
        Map<String, ServerRunningMonitor> monitors = new HashMap<>();
        for (String raw : destinations) {
            final String destination = raw.trim();
            if (destination.isEmpty()) {
                continue;
            }
            ServerRunningMonitor monitor = new ServerRunningMonitor(runningData);
            monitor.setDestination(destination);
            if (zkClient != null) {
                monitor.setZkClient(zkClient);
            }
            final String clusterNode = ZookeeperPathUtils.getDestinationClusterNode(destination, node);
            monitor.setListener(new ServerRunningListener() {

                public void processStart() {
                    if (zkClient != null) { // the destination's cluster, which Canal's clients list
                        register(clusterNode);
                    }
                }

                public void processStop() {
                    if (zkClient != null) {
                        zkClient.delete(clusterNode);
                    }
                }

                public void processActiveEnter() {
                    embedded.start(destination);
                }

                public void processActiveExit() {
                    embedded.stop(destination);
                }
            });
            monitor.init();
            monitors.put(destination, monitor);
        }
        ServerRunningMonitors.setRunningMonitors(monitors);

        // Kafka mode, as the deployer's CanalStarter runs it: no client port; Canal's own
        // CanalMQStarter reads each destination as client 1001 and hands every batch to the
        // Kafka producer plugin (on the classpath here), acking its store once Kafka has it.
        CanalMQProducer producer = null;
        if (kafka) {
            producer = kafkaProducer();
        }
        embedded.start();
        for (ServerRunningMonitor monitor : monitors.values()) {
            monitor.start();
        }
        CanalServerWithNetty netty = kafka ? null : CanalServerWithNetty.instance();
        if (kafka) {
            new CanalMQStarter(producer).start(String.join(",", monitors.keySet()));
            LOG.info("## canalbridge dev launcher: canal server publishing to kafka for {}", monitors.keySet());
        } else {
            netty.setIp(ip);
            netty.setPort(port);
            netty.start();
            LOG.info("## canalbridge dev launcher: canal server listening on {}:{} for {}", ip, port, monitors.keySet());
        }

        final CanalServerWithNetty nettyServer = netty;
        final CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            LOG.info("## canalbridge dev launcher: stopping the canal server");
            try {
                for (ServerRunningMonitor monitor : monitors.values()) {
                    if (monitor.isStart()) {
                        monitor.stop();
                    }
                }
                if (nettyServer != null) {
                    nettyServer.stop(); // stops the embedded server and with it every instance (meta flushed)
                } else {
                    embedded.stop(); // CanalMQStarter's own hook stops its workers and the producer
                }
            } catch (Throwable e) {
                LOG.warn("## something went wrong while stopping the canal server", e);
            }
            LOG.info("## canalbridge dev launcher: canal server stopped");
            stopped.countDown();
        }, "canal-shutdown"));
        stopped.await();
    }

    /** Canal's Kafka producer, given canal.properties whole as the deployer does (kafka.* and canal.mq.* keys). */
    private CanalMQProducer kafkaProducer() {
        try {
            CanalMQProducer producer = (CanalMQProducer) Class.forName(KAFKA_PRODUCER).getDeclaredConstructor()
                .newInstance();
            producer.init(server.resolved());
            return producer;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("Canal's Kafka producer plugin (" + KAFKA_PRODUCER
                + ") is not on the classpath", e);
        }
    }

    /** One destination, wired as the deployer's file-instance.xml does, from our key names. */
    private CanalInstance instance(String destination) {
        Settings p;
        try {
            p = new Settings(load(new File(new File(confDir, destination), "instance.properties"), server.files),
                destination);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read instance.properties of " + destination, e);
        }

        LogAlarmHandler alarm = new LogAlarmHandler();
        CanalMetaManager meta = metaManager(p, zk);

        MemoryEventStoreWithBuffer store = new MemoryEventStoreWithBuffer();
        store.setBufferSize(Integer.parseInt(p.get("canal.instance.memory.buffer.size", "16384")));
        store.setBufferMemUnit(Integer.parseInt(p.get("canal.instance.memory.buffer.memunit", "1024")));
        store.setBatchMode(BatchMode.valueOf(p.get("canal.instance.memory.batch.mode", "MEMSIZE")));
        store.setDdlIsolation(p.bool("canal.instance.get.ddl.isolation", false));
        // The deployer turns raw entries off for flat messages, which are built from parsed entries.
        boolean flat = "kafka".equalsIgnoreCase(p.get("canal.serverMode", "tcp"))
            && p.bool("canal.mq.flatMessage", true);
        store.setRaw(!flat && p.bool("canal.instance.memory.rawEntry", true));

        EntryEventSink sink = new EntryEventSink();
        sink.setEventStore(store);
        sink.setFilterTransactionEntry(p.bool("canal.instance.filter.transaction.entry", false));

        MysqlEventParser parser = new MysqlEventParser();
        parser.setDestination(destination);
        parser.setSlaveId(Long.parseLong(p.get("canal.instance.mysql.slaveId", "0")));
        parser.setDetectingEnable(false);
        HeartBeatHAController ha = new HeartBeatHAController();
        ha.setDetectingRetryTimes(3);
        ha.setSwitchEnable(false);
        parser.setHaController(ha);
        parser.setAlarmHandler(alarm);
        parser.setEventSink(sink);
        parser.setEventFilter(new AviaterRegexFilter(p.get("canal.instance.filter.regex", ".*\\..*")));
        parser.setEventBlackFilter(new AviaterRegexFilter(p.get("canal.instance.filter.black.regex", ""), false));
        parser.setTransactionSize(Integer.parseInt(p.get("canal.instance.transaction.size", "1024")));
        parser.setReceiveBufferSize(Integer.parseInt(p.get("canal.instance.network.receiveBufferSize", "16384")));
        parser.setSendBufferSize(Integer.parseInt(p.get("canal.instance.network.sendBufferSize", "16384")));
        parser.setDefaultConnectionTimeoutInSeconds(Integer.parseInt(p.get("canal.instance.network.soTimeout", "30")));
        parser.setConnectionCharset(p.get("canal.instance.connectionCharset", "UTF-8"));
        parser.setLogPositionManager(new FailbackLogPositionManager(new MemoryLogPositionManager(),
            new MetaLogPositionManager(meta)));
        parser.setFallbackIntervalInSeconds(Integer.parseInt(p.get("canal.instance.fallbackIntervalInSeconds", "60")));
        parser.setMasterInfo(new AuthenticationInfo(address(p.get("canal.instance.master.address", "")),
            p.get("canal.instance.dbUsername", ""), p.get("canal.instance.dbPassword", "")));
        String journal = p.get("canal.instance.master.journal.name", "");
        if (!journal.isEmpty()) {
            // With the schema history on, a position without its time makes Canal look for the time by
            // rewinding to the last transaction boundary before the offset (MysqlEventParser).
            String timestamp = p.get("canal.instance.master.timestamp", "");
            parser.setMasterPosition(new EntryPosition(journal,
                Long.valueOf(p.get("canal.instance.master.position", "4")),
                timestamp.isEmpty() ? null : Long.valueOf(timestamp)));
        }
        parser.setFilterQueryDml(p.bool("canal.instance.filter.query.dml", false));
        parser.setFilterQueryDcl(p.bool("canal.instance.filter.query.dcl", false));
        parser.setFilterQueryDdl(p.bool("canal.instance.filter.query.ddl", false));
        parser.setUseDruidDdlFilter(p.bool("canal.instance.filter.druid.ddl", true));
        parser.setFilterRows(p.bool("canal.instance.filter.rows", false));
        parser.setFilterTableError(p.bool("canal.instance.filter.table.error", false));
        parser.setFilterDmlInsert(p.bool("canal.instance.filter.dml.insert", false));
        parser.setFilterDmlUpdate(p.bool("canal.instance.filter.dml.update", false));
        parser.setFilterDmlDelete(p.bool("canal.instance.filter.dml.delete", false));
        parser.setSupportBinlogFormats(p.get("canal.instance.binlog.format", "ROW"));
        parser.setSupportBinlogImages(p.get("canal.instance.binlog.image", "FULL"));
        history(p, parser);
        parser.setIsGTIDMode(p.bool("canal.instance.gtidon", false));
        parser.setParallel(p.bool("canal.instance.parser.parallel", true));
        parser.setParallelBufferSize(Integer.parseInt(p.get("canal.instance.parser.parallelBufferSize", "256")));
        String threads = p.get("canal.instance.parser.parallelThreadSize", "");
        if (!threads.isEmpty()) {
            parser.setParallelThreadSize(Integer.valueOf(threads));
        }
        parser.setAutoResetLatestPosMode(p.bool("canal.auto.reset.latest.pos.mode", false));

        CanalInstanceWithSpring instance = new CanalInstanceWithSpring();
        instance.setDestination(destination);
        instance.setEventParser(parser);
        instance.setEventSink(sink);
        instance.setEventStore(store);
        instance.setMetaManager(meta);
        instance.setAlarmHandler(alarm);
        instance.setMqConfig(mqConfig(p));
        return instance;
    }

    /** The cursor store canal.instance.global.spring.xml names: meta.dat files, memory only, or ZooKeeper. */
    private static CanalMetaManager metaManager(Settings p, ZkClientx zk) {
        String xml = p.get("canal.instance.global.spring.xml", FILE_INSTANCE);
        if (ZOOKEEPER_INSTANCE.equals(xml)) {
            if (zk == null) {
                throw new IllegalArgumentException(ZOOKEEPER_INSTANCE + " keeps the cursors in ZooKeeper: set canal.zkServers");
            }
            ZooKeeperMetaManager zookeeper = new ZooKeeperMetaManager();
            zookeeper.setZkClientx(zk);
            PeriodMixedMetaManager meta = new PeriodMixedMetaManager();
            meta.setZooKeeperMetaManager(zookeeper);
            meta.setPeriod(Long.parseLong(p.get("canal.zookeeper.flush.period", "1000")));
            return meta;
        }
        if (FILE_INSTANCE.equals(xml)) {
            FileMixedMetaManager meta = new FileMixedMetaManager();
            meta.setDataDir(p.get("canal.file.data.dir", "../conf"));
            meta.setPeriod(Long.parseLong(p.get("canal.file.flush.period", "1000")));
            return meta;
        }
        if (MEMORY_INSTANCE.equals(xml)) {
            return new MemoryMetaManager();
        }
        throw new IllegalArgumentException("canal.instance.global.spring.xml = " + xml + ": only " + FILE_INSTANCE
            + ", " + MEMORY_INSTANCE + " and " + ZOOKEEPER_INSTANCE + " are supported here");
    }

    /**
     * The schema history, as file-instance.xml hands it to the parser: on with canal.instance.tsdb.enable
     * (true unless set) and a canal.instance.tsdb.spring.xml; an empty spring.xml means none, as in Canal.
     */
    private static void history(Settings p, MysqlEventParser parser) {
        String xml = p.get("canal.instance.tsdb.spring.xml", "");
        boolean on = p.bool("canal.instance.tsdb.enable", true) && !xml.isEmpty();
        parser.setEnableTsdb(on);
        if (!on) {
            return;
        }
        String url = p.get("canal.instance.tsdb.url", "");
        String user = p.get("canal.instance.tsdb.dbUsername", "");
        String password = p.get("canal.instance.tsdb.dbPassword", "");
        // The parser puts these three in system properties while it builds the history (it has to be non-null).
        parser.setTsdbSpringXml(xml);
        parser.setTsdbJdbcUrl(url);
        parser.setTsdbJdbcUserName(user);
        parser.setTsdbJdbcPassword(password);
        parser.setTsdbSnapshotInterval(Integer.parseInt(p.get("canal.instance.tsdb.snapshot.interval", "24")));
        parser.setTsdbSnapshotExpire(Integer.parseInt(p.get("canal.instance.tsdb.snapshot.expire", "360")));
        parser.setTableMetaTSDBFactory(new TableHistory(xml, url, user, password));
    }

    /** The destination's canal.mq.* keys (file-instance.xml's CanalMQConfig bean); unused in tcp mode. */
    private static CanalMQConfig mqConfig(Settings p) {
        CanalMQConfig config = new CanalMQConfig();
        config.setTopic(p.get("canal.mq.topic", "example"));
        config.setPartition(Integer.valueOf(p.get("canal.mq.partition", "0")));
        String partitions = p.get("canal.mq.partitionsNum", "");
        if (!partitions.isEmpty()) {
            config.setPartitionsNum(Integer.valueOf(partitions));
        }
        String hash = p.get("canal.mq.partitionHash", "");
        config.setPartitionHash(hash.isEmpty() ? null : hash);
        String dynamic = p.get("canal.mq.dynamicTopic", "");
        config.setDynamicTopic(dynamic.isEmpty() ? null : dynamic);
        return config;
    }

    /** An ephemeral node of this server's session (its parents made first), kept as it is if it exists. */
    private void register(String path) {
        zk.createPersistent(path.substring(0, path.lastIndexOf('/')), true);
        try {
            zk.createEphemeral(path);
        } catch (org.I0Itec.zkclient.exception.ZkNodeExistsException e) {
            // (a start after a stop in the same session)
        }
    }

    private void requireEmpty(String key, String why) {
        if (!server.get(key, "").isEmpty()) {
            throw new IllegalArgumentException(key + " is set: " + why);
        }
    }

    private static Properties load(File file, Properties defaults) throws IOException {
        Properties merged = new Properties();
        merged.putAll(defaults);
        try (InputStream in = new FileInputStream(file)) {
            Properties own = new Properties();
            own.load(in);
            merged.putAll(own);
        }
        return merged;
    }

    /**
     * The deployer's view of the configuration: -D system properties over the files (Spring's
     * SYSTEM_PROPERTIES_MODE_OVERRIDE), ${key} and ${key:default} resolved in values, and the destination's
     * name as canal.instance.destination. A system property set to the empty string counts as unset:
     * Canal's parser resets its tsdb keys that way after it read them.
     */
    private static final class Settings {

        private static final int MAX_DEPTH = 16;

        final Properties files;
        private final String destination;

        Settings(Properties files, String destination) {
            this.files = files;
            this.destination = destination;
        }

        /** A key's resolved and trimmed value, or the default when it is unset or empty. */
        String get(String key, String defaultValue) {
            String raw = lookup(key);
            String value = raw == null ? "" : resolve(key, raw, 0).trim();
            return value.isEmpty() ? defaultValue : value;
        }

        boolean bool(String key, boolean defaultValue) {
            return Boolean.parseBoolean(get(key, String.valueOf(defaultValue)));
        }

        /**
         * Every key with its value resolved, as the deployer hands canal.properties to an MQ producer; a value
         * naming a key no file sets (the stock canal.instance.global.manager.address) is passed as written.
         */
        Properties resolved() {
            Properties out = new Properties();
            for (String key : files.stringPropertyNames()) {
                String raw = lookup(key);
                try {
                    out.setProperty(key, resolve(key, raw, 0));
                } catch (IllegalArgumentException e) {
                    out.setProperty(key, raw);
                }
            }
            return out;
        }

        private String lookup(String key) {
            String value = System.getProperty(key);
            if (value != null && !value.isEmpty()) {
                return value;
            }
            if ("canal.instance.destination".equals(key) && !destination.isEmpty()) {
                return destination;
            }
            return files.getProperty(key);
        }

        /** ``text`` (the value of ``key``) with its placeholders resolved; errors name the key, never a value. */
        private String resolve(String key, String text, int depth) {
            if (depth > MAX_DEPTH) {
                throw new IllegalArgumentException("placeholders nest deeper than " + MAX_DEPTH + " in " + key);
            }
            StringBuilder out = new StringBuilder();
            int at = 0;
            while (true) {
                int open = text.indexOf("${", at);
                if (open < 0) {
                    return out.append(text, at, text.length()).toString();
                }
                int close = closing(text, open + 2);
                if (close < 0) {
                    throw new IllegalArgumentException("a placeholder is not closed in " + key);
                }
                out.append(text, at, open);
                String inner = resolve(key, text.substring(open + 2, close), depth + 1);
                int colon = inner.indexOf(':');
                String name = colon < 0 ? inner : inner.substring(0, colon);
                String value = lookup(name);
                if (value == null) {
                    if (colon < 0) {
                        throw new IllegalArgumentException(key + " names ${" + name + "}, a key no file sets");
                    }
                    value = inner.substring(colon + 1);
                }
                out.append(resolve(name, value, depth + 1));
                at = close + 1;
            }
        }

        private static int closing(String text, int from) {
            int depth = 1;
            for (int i = from; i < text.length(); i++) {
                if (text.startsWith("${", i)) {
                    depth++;
                    i++;
                } else if (text.charAt(i) == '}' && --depth == 0) {
                    return i;
                }
            }
            return -1;
        }
    }

    private static InetSocketAddress address(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0) {
            throw new IllegalArgumentException("canal.instance.master.address must be host:port, got " + hostPort);
        }
        return new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
    }
}
