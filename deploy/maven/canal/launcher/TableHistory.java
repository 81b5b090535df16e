/*
 * Canal's schema history (tsdb) wired without Spring, for canalbridge's
 * real-stack tests (written here, not taken from Canal).
 *
 * Canal keeps the history in its own DatabaseTableMeta and two DAOs that read
 * and write the tables meta_history and meta_snapshot through MyBatis. The
 * deployer builds them from its Spring files (spring/tsdb/h2-tsdb.xml or
 * mysql-tsdb.xml) and its MyBatis maps; the deployer is not on Maven Central,
 * so this factory builds the same objects in code and loads SQL maps written
 * here (history-mapper.xml, snapshot-mapper.xml, next to this class). The
 * tables' DDL is Canal's own: its DAOs run ddl/h2 or ddl/mysql from the
 * canal.parse jar when they start.
 */
package canalbridge.devkit;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.ibatis.session.Configuration;
import org.apache.ibatis.session.SqlSessionFactory;
import org.apache.ibatis.type.JdbcType;
import org.mybatis.spring.SqlSessionFactoryBean;
import org.springframework.core.io.ClassPathResource;
import org.springframework.core.io.Resource;

import com.alibaba.druid.pool.DruidDataSource;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.DatabaseTableMeta;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.TableMetaTSDB;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.TableMetaTSDBFactory;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.dao.MetaHistoryDAO;
import com.alibaba.otter.canal.parse.inbound.mysql.tsdb.dao.MetaSnapshotDAO;

/** One destination's schema history in H2 or MySQL/MariaDB, as the deployer's tsdb Spring files build it. */
final class TableHistory implements TableMetaTSDBFactory {

    private static final String MAPS = "canalbridge/devkit/";

    private final String driver;
    private final String url;
    private final String user;
    private final String password;
    private final Map<String, Opened> open = new ConcurrentHashMap<>();

    private static final class Opened {
        final DatabaseTableMeta meta;
        final DruidDataSource pool;

        Opened(DatabaseTableMeta meta, DruidDataSource pool) {
            this.meta = meta;
            this.pool = pool;
        }
    }

    /**
     * @param springXml {@code canal.instance.tsdb.spring.xml}: which of the deployer's two tsdb files the
     *     configuration names decides the JDBC driver, as it does in the deployer
     */
    TableHistory(String springXml, String url, String user, String password) {
        this.driver = driverFor(springXml);
        if (url.isEmpty()) {
            throw new IllegalArgumentException("canal.instance.tsdb.url is empty, but the schema history is on");
        }
        this.url = url;
        this.user = user;
        this.password = password;
    }

    static String driverFor(String springXml) {
        if (springXml.endsWith("h2-tsdb.xml")) {
            return "org.h2.Driver";
        }
        if (springXml.endsWith("mysql-tsdb.xml")) {
            return "com.mysql.jdbc.Driver";
        }
        throw new IllegalArgumentException("canal.instance.tsdb.spring.xml = " + springXml
            + ": only Canal's classpath:spring/tsdb/h2-tsdb.xml and mysql-tsdb.xml are known here");
    }

    @Override
    public TableMetaTSDB build(String destination, String springXml) {
        return open.computeIfAbsent(destination, name -> {
            DruidDataSource pool = new DruidDataSource();
            pool.setDriverClassName(driver);
            pool.setUrl(url);
            pool.setUsername(user);
            pool.setPassword(password);
            pool.setMaxActive(4);
            pool.setInitialSize(0);
            pool.setMinIdle(1);
            pool.setMaxWait(10000);
            pool.setValidationQuery("SELECT 1");
            pool.setTestWhileIdle(true);
            try {
                SqlSessionFactory sessions = sessions(pool);
                MetaHistoryDAO history = new MetaHistoryDAO();
                history.setSqlSessionFactory(sessions);
                history.afterPropertiesSet(); // creates meta_history from canal.parse's ddl/ if missing
                MetaSnapshotDAO snapshots = new MetaSnapshotDAO();
                snapshots.setSqlSessionFactory(sessions);
                snapshots.afterPropertiesSet();
                DatabaseTableMeta meta = new DatabaseTableMeta();
                meta.setMetaHistoryDAO(history);
                meta.setMetaSnapshotDAO(snapshots);
                return new Opened(meta, pool);
            } catch (Exception e) {
                pool.close();
                throw new IllegalStateException("cannot open the schema history of " + name + " (" + driver + ")", e);
            }
        }).meta;
    }

    @Override
    public void destory(String destination) {
        Opened opened = open.remove(destination);
        if (opened != null) {
            opened.meta.destory();
            opened.pool.close();
        }
    }

    private static SqlSessionFactory sessions(DruidDataSource pool) throws Exception {
        Configuration configuration = new Configuration();
        configuration.setMapUnderscoreToCamelCase(true); // binlog_offest -> binlogOffest
        configuration.setJdbcTypeForNull(JdbcType.NULL);
        SqlSessionFactoryBean bean = new SqlSessionFactoryBean();
        bean.setDataSource(pool);
        bean.setConfiguration(configuration);
        bean.setMapperLocations(new Resource[] {new ClassPathResource(MAPS + "history-mapper.xml"),
            new ClassPathResource(MAPS + "snapshot-mapper.xml")});
        return bean.getObject();
    }
}
