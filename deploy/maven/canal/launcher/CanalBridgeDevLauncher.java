/*
 * A minimal standalone launcher for Canal's server components, written for
 * canalbridge's real-stack tests (not taken from Canal).
 *
 * Why it exists: Maven Central carries Canal's server modules (canal.server,
 * canal.parse, canal.instance.*) up to 1.1.7 but no canal.deployer (the module
 * with CanalLauncher and the Spring instance files) for 1.1.5 or later, and
 * nothing of the server side of 1.1.8. This class does what the deployer does
 * for one configuration only: tcp or kafka mode, no ZooKeeper, no admin port, file meta
 * (FileMixedMetaManager, so a restart resumes from meta.dat), a memory store,
 * a MySQL binlog parser, tsdb off. Everything else is Canal's own code.
 *
 * It reads the deployer's own key names: CONF_DIR/canal.properties, then
 * CONF_DIR/DESTINATION/instance.properties over it, then -Dkey=value over both
 * (the deployer's Spring placeholder order). Usage:
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
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningData;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningListener;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningMonitor;
import com.alibaba.otter.canal.common.zookeeper.running.ServerRunningMonitors;
import com.alibaba.otter.canal.connector.core.spi.CanalMQProducer;
import com.alibaba.otter.canal.filter.aviater.AviaterRegexFilter;
import com.alibaba.otter.canal.instance.core.CanalInstance;
import com.alibaba.otter.canal.instance.core.CanalMQConfig;
import com.alibaba.otter.canal.instance.spring.CanalInstanceWithSpring;
import com.alibaba.otter.canal.meta.FileMixedMetaManager;
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

    private static final String KAFKA_PRODUCER = "com.alibaba.otter.canal.connector.kafka.producer.CanalKafkaProducer";

    private static final Logger LOG = LoggerFactory.getLogger(CanalBridgeDevLauncher.class);

    private final File confDir;
    private final Properties server;

    private CanalBridgeDevLauncher(File confDir) throws IOException {
        this.confDir = confDir;
        this.server = load(new File(confDir, "canal.properties"), new Properties());
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
        requireEmpty("canal.zkServers", "ZooKeeper is not supported by this launcher");
        requireEmpty("canal.admin.manager", "canal-admin is not supported by this launcher");
        String mode = get(server, "canal.serverMode", "tcp").toLowerCase();
        boolean kafka = "kafka".equals(mode);
        if (!kafka && !"tcp".equals(mode)) {
            throw new IllegalArgumentException("canal.serverMode = " + mode + ": only tcp and kafka are supported here");
        }
        String user = get(server, "canal.user", "");
        String passwd = get(server, "canal.passwd", "");
        if (!user.isEmpty() && passwd.isEmpty()) {
            throw new IllegalArgumentException("canal.user is set but canal.passwd is empty");
        }
        String ip = get(server, "canal.ip", "");
        if (ip.isEmpty()) {
            throw new IllegalArgumentException("canal.ip is empty: it would listen on every interface");
        }
        int port = Integer.parseInt(get(server, "canal.port", "11111"));
        String[] destinations = get(server, "canal.destinations", "").split(",");

        final CanalServerWithEmbedded embedded = CanalServerWithEmbedded.instance();
        embedded.setCanalInstanceGenerator(this::instance);
        embedded.setUser(user.isEmpty() ? null : user);
        embedded.setPasswd(passwd.isEmpty() ? null : passwd);

        // The netty handlers ask these monitors to start a destination on
        // subscribe; without ZooKeeper a monitor just starts or stops it.
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
            monitor.setListener(new ServerRunningListener() {

                public void processStart() {
                }

                public void processStop() {
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
            producer.init(server);
            return producer;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("Canal's Kafka producer plugin (" + KAFKA_PRODUCER
                + ") is not on the classpath", e);
        }
    }

    /** One destination, wired as the deployer's file-instance.xml does, from our key names. */
    private CanalInstance instance(String destination) {
        Properties p;
        try {
            p = load(new File(new File(confDir, destination), "instance.properties"), server);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read instance.properties of " + destination, e);
        }
        if (bool(p, "canal.instance.tsdb.enable", false)) {
            throw new IllegalArgumentException("canal.instance.tsdb.enable = true is not supported here");
        }

        LogAlarmHandler alarm = new LogAlarmHandler();

        FileMixedMetaManager meta = new FileMixedMetaManager();
        meta.setDataDir(get(p, "canal.file.data.dir", new File(confDir, "data").getPath()));
        meta.setPeriod(Long.parseLong(get(p, "canal.file.flush.period", "1000")));

        MemoryEventStoreWithBuffer store = new MemoryEventStoreWithBuffer();
        store.setBufferSize(Integer.parseInt(get(p, "canal.instance.memory.buffer.size", "16384")));
        store.setBufferMemUnit(Integer.parseInt(get(p, "canal.instance.memory.buffer.memunit", "1024")));
        store.setBatchMode(BatchMode.valueOf(get(p, "canal.instance.memory.batch.mode", "MEMSIZE")));
        store.setDdlIsolation(bool(p, "canal.instance.get.ddl.isolation", false));
        // The deployer turns raw entries off for flat messages, which are built from parsed entries.
        boolean flat = "kafka".equalsIgnoreCase(get(p, "canal.serverMode", "tcp"))
            && bool(p, "canal.mq.flatMessage", true);
        store.setRaw(!flat && bool(p, "canal.instance.memory.rawEntry", true));

        EntryEventSink sink = new EntryEventSink();
        sink.setEventStore(store);
        sink.setFilterTransactionEntry(bool(p, "canal.instance.filter.transaction.entry", false));

        MysqlEventParser parser = new MysqlEventParser();
        parser.setDestination(destination);
        parser.setSlaveId(Long.parseLong(get(p, "canal.instance.mysql.slaveId", "0")));
        parser.setDetectingEnable(false);
        HeartBeatHAController ha = new HeartBeatHAController();
        ha.setDetectingRetryTimes(3);
        ha.setSwitchEnable(false);
        parser.setHaController(ha);
        parser.setAlarmHandler(alarm);
        parser.setEventSink(sink);
        parser.setEventFilter(new AviaterRegexFilter(get(p, "canal.instance.filter.regex", ".*\\..*")));
        parser.setEventBlackFilter(new AviaterRegexFilter(get(p, "canal.instance.filter.black.regex", ""), false));
        parser.setTransactionSize(Integer.parseInt(get(p, "canal.instance.transaction.size", "1024")));
        parser.setReceiveBufferSize(Integer.parseInt(get(p, "canal.instance.network.receiveBufferSize", "16384")));
        parser.setSendBufferSize(Integer.parseInt(get(p, "canal.instance.network.sendBufferSize", "16384")));
        parser.setDefaultConnectionTimeoutInSeconds(Integer.parseInt(get(p, "canal.instance.network.soTimeout", "30")));
        parser.setConnectionCharset(get(p, "canal.instance.connectionCharset", "UTF-8"));
        parser.setLogPositionManager(new FailbackLogPositionManager(new MemoryLogPositionManager(),
            new MetaLogPositionManager(meta)));
        parser.setFallbackIntervalInSeconds(Integer.parseInt(get(p, "canal.instance.fallbackIntervalInSeconds", "60")));
        parser.setMasterInfo(new AuthenticationInfo(address(get(p, "canal.instance.master.address", "")),
            get(p, "canal.instance.dbUsername", ""), get(p, "canal.instance.dbPassword", "")));
        String journal = get(p, "canal.instance.master.journal.name", "");
        if (!journal.isEmpty()) {
            parser.setMasterPosition(new EntryPosition(journal,
                Long.valueOf(get(p, "canal.instance.master.position", "4"))));
        }
        parser.setFilterQueryDml(bool(p, "canal.instance.filter.query.dml", false));
        parser.setFilterQueryDcl(bool(p, "canal.instance.filter.query.dcl", false));
        parser.setFilterQueryDdl(bool(p, "canal.instance.filter.query.ddl", false));
        parser.setUseDruidDdlFilter(bool(p, "canal.instance.filter.druid.ddl", true));
        parser.setFilterRows(bool(p, "canal.instance.filter.rows", false));
        parser.setFilterTableError(bool(p, "canal.instance.filter.table.error", false));
        parser.setFilterDmlInsert(bool(p, "canal.instance.filter.dml.insert", false));
        parser.setFilterDmlUpdate(bool(p, "canal.instance.filter.dml.update", false));
        parser.setFilterDmlDelete(bool(p, "canal.instance.filter.dml.delete", false));
        parser.setSupportBinlogFormats(get(p, "canal.instance.binlog.format", "ROW"));
        parser.setSupportBinlogImages(get(p, "canal.instance.binlog.image", "FULL"));
        parser.setEnableTsdb(false);
        parser.setIsGTIDMode(bool(p, "canal.instance.gtidon", false));
        parser.setParallel(bool(p, "canal.instance.parser.parallel", true));
        parser.setParallelBufferSize(Integer.parseInt(get(p, "canal.instance.parser.parallelBufferSize", "256")));
        String threads = get(p, "canal.instance.parser.parallelThreadSize", "");
        if (!threads.isEmpty()) {
            parser.setParallelThreadSize(Integer.valueOf(threads));
        }
        parser.setAutoResetLatestPosMode(bool(p, "canal.auto.reset.latest.pos.mode", false));

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

    /** The destination's canal.mq.* keys (file-instance.xml's CanalMQConfig bean); unused in tcp mode. */
    private static CanalMQConfig mqConfig(Properties p) {
        CanalMQConfig config = new CanalMQConfig();
        config.setTopic(get(p, "canal.mq.topic", "example"));
        config.setPartition(Integer.valueOf(get(p, "canal.mq.partition", "0")));
        String partitions = get(p, "canal.mq.partitionsNum", "");
        if (!partitions.isEmpty()) {
            config.setPartitionsNum(Integer.valueOf(partitions));
        }
        String hash = get(p, "canal.mq.partitionHash", "");
        config.setPartitionHash(hash.isEmpty() ? null : hash);
        String dynamic = get(p, "canal.mq.dynamicTopic", "");
        config.setDynamicTopic(dynamic.isEmpty() ? null : dynamic);
        return config;
    }

    private void requireEmpty(String key, String why) {
        if (!get(server, key, "").isEmpty()) {
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

    /** A key's value: a -D system property first, then the files; trimmed; the default when empty. */
    private static String get(Properties p, String key, String defaultValue) {
        String value = System.getProperty(key);
        if (value == null) {
            value = p.getProperty(key);
        }
        value = value == null ? "" : value.trim();
        return value.isEmpty() ? defaultValue : value;
    }

    private static boolean bool(Properties p, String key, boolean defaultValue) {
        return Boolean.parseBoolean(get(p, key, String.valueOf(defaultValue)));
    }

    private static InetSocketAddress address(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0) {
            throw new IllegalArgumentException("canal.instance.master.address must be host:port, got " + hostPort);
        }
        return new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
    }
}
